"""A judge is pinned by name only: the ledger keeps what each reply says served it (`reply_model`,
`system_fingerprint`), sql/judge_drift.sql finds where that changed between runs of the same judge name
(or within one run), and `compare` and the report say so (issue 14)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path

import pytest

from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.judge.prompts import get_prompt
from raglake.lake.calls import LakeCallStore, drift_note, judge_drift
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.report.data import gather
from tests.fake_openai import FakeOpenAI, ok
from tests.lakekit import land

GROUNDED = {"score": 4, "supported_claims": ["Atlas uses Postgres 16"], "unsupported_claims": [], "reasoning": "ok"}
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

# judge name -> run -> what its replies named: (reply_model, system_fingerprint) per call
CALLS = {
    "gpt-4o": {
        "r-a": [("gpt-4o-2024-08-06", "fp_1"), ("gpt-4o-2024-08-06", "fp_1")],
        "r-b": [("gpt-4o-2024-08-06", "fp_2")],  # same model, new serving configuration
        "r-c": [("gpt-4o-2024-11-20", "fp_2")],  # another model behind the same name
        "r-d": [("gpt-4o-2024-11-20", "fp_2"), ("gpt-4o-2024-11-20", "fp_3")],  # changed mid-run
    },
    "local": {
        "r-a": [(None, None)],  # a server that names nothing: no evidence either way
        "r-b": [("smollm2-135m-instruct", None)],
    },
}


def _inputs(folder: Path) -> tuple[str, str]:
    golden, captures = folder / "golden.jsonl", folder / "captures.jsonl"
    golden.write_text(
        "".join(
            json.dumps({"id": f"c{i}", "question": f"q{i}?", "gold_supports": [{"rel_path": f"d{i}.md"}]}) + "\n"
            for i in range(3)
        )
    )
    captures.write_text(
        "".join(
            json.dumps({"case_id": f"c{i}", "answer": "a", "retrieved": [{"rank": 1, "rel_path": f"d{i}.md"}]}) + "\n"
            for i in range(3)
        )
    )
    return str(golden), f"replay:{captures}"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("drift")
    golden, target = _inputs(root)
    lake_dir = str(root / "lake")
    for minutes, run_id in enumerate(("r-a", "r-b", "r-c", "r-d", "r-none")):
        land(lake_dir, golden, target, run_id, minutes=minutes, metrics=["recall_any_at_k"])
    rows = [
        {
            "call_key": f"{judge}-{run_id}-{n}",
            "created_at": T0 + dt.timedelta(minutes=n),
            "run_id": run_id,
            "model": judge,
            "prompt_id": "groundedness",
            "status": "ok",
            "reply_model": served,
            "system_fingerprint": fingerprint,
        }
        for judge, runs in CALLS.items()
        for run_id, served_calls in runs.items()
        for n, (served, fingerprint) in enumerate(served_calls)
    ]
    LakeCallStore(Lake(lake_dir)).append(rows)
    return lake_dir


def _changes(lake: str, run_ids: list[str]) -> list[tuple]:
    rows = judge_drift(open_lake(lake).con, run_ids)
    return [(r["judge"], r["scope"], r["run_before"], r["run_after"], r["change"]) for r in rows]


def test_a_new_fingerprint_under_the_same_model_is_a_change(lake):
    assert _changes(lake, ["r-a", "r-b"]) == [("gpt-4o", "between runs", "r-a", "r-b", "system_fingerprint")]


def test_another_model_behind_the_same_name_is_a_change(lake):
    assert _changes(lake, ["r-b", "r-c"]) == [("gpt-4o", "between runs", "r-b", "r-c", "model")]
    assert _changes(lake, ["r-a", "r-c"]) == [("gpt-4o", "between runs", "r-a", "r-c", "model, system_fingerprint")]
    [row] = judge_drift(open_lake(lake).con, ["r-b", "r-c"])
    assert (row["models_before"], row["models_after"]) == (["gpt-4o-2024-08-06"], ["gpt-4o-2024-11-20"])


def test_the_lists_order_says_which_run_comes_first(lake):
    assert _changes(lake, ["r-c", "r-b"]) == [("gpt-4o", "between runs", "r-c", "r-b", "model")]


def test_a_change_within_one_run_is_flagged(lake):
    assert _changes(lake, ["r-d"]) == [("gpt-4o", "within run", "r-d", "r-d", "system_fingerprint")]
    assert ("gpt-4o", "within run", "r-d", "r-d", "system_fingerprint") in _changes(lake, ["r-c", "r-d"])


def test_no_change_and_no_evidence_give_no_row(lake):
    assert _changes(lake, ["r-c", "r-c"]) == []
    assert _changes(lake, ["r-b", "r-none"]) == []  # r-none made no judge call: nothing to compare
    # `local` named no model in r-a: a model appearing in r-b is not a change
    assert [c for c in _changes(lake, ["r-a", "r-b"]) if c[0] == "local"] == []


def test_compare_prints_the_change(lake):
    from typer.testing import CliRunner

    from raglake.cli import app

    result = CliRunner().invoke(app, ["compare", "r-b", "r-c", "--lake", lake])
    assert result.exit_code == 0, result.output + repr(result.exception)
    out = " ".join(result.output.split())
    assert "note: judge 'gpt-4o' changed between runs r-b and r-c (model)" in out
    assert "gpt-4o-2024-08-06 (system_fingerprint fp_2) → gpt-4o-2024-11-20 (system_fingerprint fp_2)" in out
    quiet = CliRunner().invoke(app, ["compare", "r-c", "r-c", "--lake", lake])
    assert quiet.exit_code == 0 and "changed between runs" not in quiet.output


def test_the_report_notes_the_change_against_its_baseline_or_the_previous_run(lake):
    q = open_lake(lake)
    against = gather(q, "r-c", "r-b", worst=0)
    assert [n for n in against.notes if "judge 'gpt-4o'" in n] == [
        drift_note(r) for r in judge_drift(q.con, ["r-b", "r-c"])
    ]
    previous = gather(q, "r-b", worst=0)  # no baseline: the previous run of the same target and golden set
    assert any("changed between runs r-a and r-b (system_fingerprint)" in n for n in previous.notes)
    # r-none made no call; its baseline r-d's change within itself is r-d's, not r-none's
    assert not any("judge" in n for n in gather(q, "r-none", worst=0).notes)
    assert any("changed within run r-d" in n for n in gather(q, "r-d", worst=0).notes)


def test_the_gateway_stores_what_the_reply_says_served_it(tmp_path):
    lake = Lake(tmp_path / "lake")
    config = JudgeConfig(base_url="http://127.0.0.1:1/v1", model="gpt-4o", max_retries=0)
    values = {"answer": "Atlas uses Postgres 16 [1].", "contexts": "[1] Atlas runs Postgres 16."}
    with FakeOpenAI() as server:
        server.reply_model, server.fingerprint = "gpt-4o-2024-11-20", "fp_abc"
        server.script(ok(GROUNDED), ok(GROUNDED, model="gpt-4o-mini-2024-07-18", system_fingerprint="fp_other"))
        gateway = JudgeGateway(config.with_model("gpt-4o", server.url), JudgeLedger(LakeCallStore(lake), "r-1"))
        prompt = get_prompt("groundedness")

        async def two_calls() -> None:  # one event loop: the client belongs to it
            await gateway.call(prompt, values)
            await gateway.call(prompt, {**values, "answer": "Atlas uses Postgres."})

        asyncio.run(two_calls())
        gateway.ledger.flush()
    rows = connect(lake).sql("SELECT model, reply_model, system_fingerprint FROM judge_calls ORDER BY created_at")
    assert rows.fetchall() == [
        ("gpt-4o", "gpt-4o-2024-11-20", "fp_abc"),
        ("gpt-4o", "gpt-4o-mini-2024-07-18", "fp_other"),
    ]
