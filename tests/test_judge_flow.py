"""The judge stage in the `evaluate` flow, against the loopback OpenAI-compatible server: judge
scores carry their model and prompt, the run records its judges and prompt versions and its judge
figures (calls, cost, spot-check disagreement); re-running the same inputs makes zero HTTP calls and
gives identical judge scores; a small budget skips the rest (reason budget) and the CLI says so; with
no judge, judge metrics are skipped (no_judge) and the summary says how to configure one."""

from __future__ import annotations

import json
import math
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from raglake.judge.config import load_prices
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import RunSettings
from tests.fake_openai import FakeOpenAI, Reply, canned_reply, ok, prompt_id_of

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

MAIN, SPOT = "gpt-4o-mini", "other"
JUDGE_METRICS = ["groundedness", "correctness", "faithfulness", "factual_accuracy", "context_precision"]
METRICS = ["recall_any_at_k", *JUDGE_METRICS]
# the prompts these metrics use (faithfulness: two)
PROMPTS = {"groundedness", "correctness", "extract_claims", "verify_claims", "factual_accuracy", "context_precision"}
CALLS_PER_CASE = 6
SPOT_STEPS = ("groundedness", "correctness", "factual_accuracy")  # the selected steps the spot-check repeats
N_CASES = 4
PRICE = load_prices()[MAIN]


def write_inputs(folder: Path) -> tuple[str, str]:
    """A golden set of 4 answerable cases and the replay file of their captures."""
    folder.mkdir(parents=True, exist_ok=True)
    topics = [("database", "Postgres 16"), ("queue", "RabbitMQ"), ("cache", "Redis 7"), ("search", "OpenSearch")]
    golden, captures = [], []
    for i, (what, answer) in enumerate(topics, start=1):
        cid = f"j{i}"
        golden.append(
            {
                "id": cid,
                "question": f"Which {what} does Atlas use?",
                "reference_answer": f"Atlas uses {answer}.",
                "category": "factual",
                "gold_supports": [{"rel_path": f"work/{what}.md", "heading_path": "Atlas"}],
            }
        )
        captures.append(
            {
                "case_id": cid,
                "method": "m1",
                "answer": f"Atlas uses {answer} [1].",
                "abstained": False,
                "retrieved": [
                    {
                        "rank": 1,
                        "rel_path": f"work/{what}.md",
                        "heading_path": "Atlas",
                        "text": f"Atlas runs {answer}.",
                    },
                    {"rank": 2, "rel_path": "work/other.md", "heading_path": "Other", "text": "Unrelated notes."},
                ],
            }
        )
    g, c = folder / "golden.jsonl", folder / "captures.jsonl"
    g.write_text("".join(json.dumps(x) + "\n" for x in golden))
    c.write_text("".join(json.dumps(x) + "\n" for x in captures))
    return str(g), f"replay:{c}"


def two_judges(body: dict[str, Any]) -> Reply:
    """Valid answers to every prompt; the spot-check model scores groundedness 1 (the main one: 4)."""
    if body.get("model") == SPOT and prompt_id_of(body) == "groundedness":
        return ok({"score": 1, "supported_claims": [], "unsupported_claims": ["x"], "reasoning": "r"})
    return canned_reply(body)


def judge_rows(lake: str, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    con = connect(Lake(lake))
    rows = (
        con.sql(
            "SELECT * FROM scores WHERE run_id = $r AND list_contains($m, metric)",
            params={"r": run_id, "m": JUDGE_METRICS},
        )
        .to_arrow_table()
        .to_pylist()
    )
    return {(r["case_id"], r["metric"]): r for r in rows}


def run_metrics(lake: str, run_id: str) -> dict[str, tuple[float, int]]:
    rows = fetch(connect(Lake(lake)), "SELECT metric, value, n FROM run_metrics WHERE run_id = $r", r=run_id)
    return {m: (v, n) for m, v, n in rows}


@dataclass
class Judged:
    lake: str
    first: str
    second: str
    key: str
    requests_first: int
    requests_second: int
    models: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def judged(tmp_path_factory) -> Judged:
    """One judged run and the same run again, over one lake and one loopback judge."""
    from raglake.flows.evaluate import evaluate

    tmp = tmp_path_factory.mktemp("judged")
    golden, target = write_inputs(tmp / "inputs")
    lake = str(tmp / "lake")
    key = "sk-flow-" + secrets.token_hex(16)
    with pytest.MonkeyPatch.context() as mp, FakeOpenAI(handler=two_judges) as server:
        mp.setenv("OPENAI_API_KEY", key)
        options = dict(
            golden=golden,
            target=target,
            lake=lake,
            metrics=METRICS,
            judge={"base_url": server.url, "model": MAIN, "backoff_s": 0.01},
            spot_check={"model": SPOT, "share": 0.5, "minimum": 2},
        )
        first = evaluate(RunSettings(**options))
        requests_first = server.count
        models = [r.model for r in server.requests]
        second = evaluate(RunSettings(**options))
        return Judged(lake, first, second, key, requests_first, server.count - requests_first, models)


def test_a_judged_run_calls_the_judge_for_every_step_and_the_spot_check(judged):
    spot_cases = max(2, round(0.5 * N_CASES))
    assert judged.models.count(MAIN) == N_CASES * CALLS_PER_CASE
    assert judged.models.count(SPOT) == spot_cases * len(SPOT_STEPS)
    assert judged.requests_first == len(judged.models)


def test_judge_scores_carry_model_and_prompt(judged):
    rows = judge_rows(judged.lake, judged.first)
    assert len(rows) == N_CASES * len(JUDGE_METRICS)
    assert all(r["status"] == "ok" for r in rows.values()), [r for r in rows.values() if r["status"] != "ok"]
    for (cid, metric), r in rows.items():
        assert r["judge_model"] == MAIN, (cid, metric)
        # every prompt of the metric's step, with their versions
        assert (r["prompt_id"], r["prompt_version"]) == {"faithfulness": ("extract_claims+verify_claims", "1+1")}.get(
            metric, (metric, "1")
        ), (cid, metric)
    # canned judge answers: groundedness 4, verdicts 0/1 over two claims, first chunk relevant, GEval .78
    assert {r["value"] for (_, m), r in rows.items() if m == "groundedness"} == {4.0}
    assert {r["value"] for (_, m), r in rows.items() if m == "faithfulness"} == {0.5}
    assert {r["value"] for (_, m), r in rows.items() if m == "context_precision"} == {0.5}
    assert {round(r["value"], 6) for (_, m), r in rows.items() if m == "factual_accuracy"} == {0.78}


def test_the_run_records_its_judges_and_prompt_versions(judged):
    [(models, versions, config)] = fetch(
        connect(Lake(judged.lake)),
        "SELECT judge_models, prompt_version_map, config_json FROM runs WHERE run_id = $r",
        r=judged.first,
    )
    assert models.split(",") == [MAIN, SPOT]
    assert versions == {p: 1 for p in PROMPTS}
    recorded = json.loads(config)["judge"]
    assert recorded["model"] == MAIN and recorded["api_key_env"] == "OPENAI_API_KEY"


def test_the_ledger_holds_every_call_and_no_key(judged):
    con = connect(Lake(judged.lake))
    rows = fetch(con, "SELECT model, status, cost_usd, price_known FROM judge_calls WHERE run_id = $r", r=judged.first)
    assert len(rows) == judged.requests_first
    assert {s for _, s, _, _ in rows} == {"ok"}
    assert all(known for m, _, _, known in rows if m == MAIN)
    assert not any(known for m, _, _, known in rows if m == SPOT)  # "other" is not in the price table
    leaked = [str(p) for p in Path(judged.lake).rglob("*") if p.is_file() and judged.key.encode() in p.read_bytes()]
    assert not leaked


def test_run_metrics_judge_cost_and_calls(judged):
    figures = run_metrics(judged.lake, judged.first)
    ledger_cost = fetch(
        connect(Lake(judged.lake)), "SELECT sum(cost_usd) FROM judge_calls WHERE run_id = $r", r=judged.first
    )[0][0]
    per_call = (120 * PRICE["input"] + 30 * PRICE["output"]) / 1e6  # the fake server's usage
    assert ledger_cost == pytest.approx(N_CASES * CALLS_PER_CASE * per_call)
    assert figures["judge_cost_usd"][0] == pytest.approx(ledger_cost)
    assert figures["judge_calls"][0] == judged.requests_first, (
        f"judge_calls {figures['judge_calls'][0]:g} but {judged.requests_first} requests reached the judges "
        f"({N_CASES * CALLS_PER_CASE} to {MAIN}, the rest to the spot-check judge {SPOT})"
    )


def test_run_metrics_spot_check(judged):
    figures = run_metrics(judged.lake, judged.first)
    pairs = 2 * len(SPOT_STEPS)  # 2 spot questions × the steps the spot-check repeats
    assert figures["spot_check_n"] == (2, 2)  # questions judged twice, not pairs
    # groundedness 4 vs 1 disagrees (> 1 point) in both spot cases; correctness and factual_accuracy agree
    assert figures["judge_disagreement_rate"] == (pytest.approx(2 / pairs), pairs)


def test_the_ledger_keeps_what_served_each_call(judged):
    rows = fetch(
        connect(Lake(judged.lake)),
        "SELECT model, reply_model, system_fingerprint FROM judge_calls WHERE run_id = $r",
        r=judged.first,
    )
    assert rows and all(reply == model and fp is None for model, reply, fp in rows)  # the fake names no fingerprint


def test_judge_latency_per_prompt_and_price_flag_are_run_figures(judged):
    con = connect(Lake(judged.lake))
    rows = fetch(
        con,
        "SELECT metric, stage, value, n FROM run_metrics WHERE run_id = $r AND metric LIKE 'latency_p%'",
        r=judged.first,
    )
    latency = {(m, stage): (v, n) for m, stage, v, n in rows}
    query = "SELECT latency_ms FROM judge_calls WHERE run_id = $r AND prompt_id = $p AND model = $m"
    for prompt in PROMPTS:  # every prompt the run called, from the ledger's latencies
        calls = [ms for (ms,) in fetch(con, query, r=judged.first, p=prompt, m=MAIN)]
        p50, n = latency["latency_p50_ms", f"judge:{prompt}"]
        assert n == len(calls) == N_CASES
        assert p50 == pytest.approx(float(np.percentile(calls, 50)))
        assert latency["latency_p95_ms", f"judge:{prompt}"][0] == pytest.approx(float(np.percentile(calls, 95)))
    for step in SPOT_STEPS:  # the spot-check's calls apart from the judge's
        assert latency["latency_p50_ms", f"spot_check:{step}"][1] == 2
    # the spot-check model has no price: the cost leaves its calls out and says so
    figures = run_metrics(judged.lake, judged.first)
    assert figures["judge_price_known"] == (0.0, judged.requests_first)
    shown = open_lake(judged.lake).figures([judged.first])  # sql/run_figures.sql
    cost = next(f for f in shown if f["metric"] == "judge_cost_usd")
    assert cost["price_known"] is False and cost["value"] > 0
    assert all(f["price_known"] is None for f in shown if f["metric"] != "judge_cost_usd")


def test_rerun_makes_zero_calls_and_gives_identical_judge_scores(judged):
    assert judged.second != judged.first
    assert judged.requests_second == 0, f"the re-run made {judged.requests_second} HTTP call(s)"
    first, second = judge_rows(judged.lake, judged.first), judge_rows(judged.lake, judged.second)
    assert first.keys() == second.keys()
    cols = ("status", "value", "reason", "judge_model", "prompt_id", "prompt_version")
    for key in first:
        assert [first[key][c] for c in cols] == [second[key][c] for c in cols], key
    again = run_metrics(judged.lake, judged.second)
    assert again["judge_calls"][0] == 0
    assert again["judge_cost_usd"][0] == 0
    assert again["judge_ledger_hits"][0] >= N_CASES * CALLS_PER_CASE
    assert again["judge_disagreement_rate"] == run_metrics(judged.lake, judged.first)["judge_disagreement_rate"]
    assert fetch(connect(Lake(judged.lake)), "SELECT count(*) FROM judge_calls WHERE run_id = $r", r=judged.second) == [
        (0,)
    ]


# ---- budget, through the command line ------------------------------------------------------------------


def test_budget_skips_the_rest_and_the_cli_says_so(tmp_path):
    from typer.testing import CliRunner

    from raglake.cli import app

    golden, target = write_inputs(tmp_path / "inputs")
    lake = str(tmp_path / "lake")
    with FakeOpenAI(handler=two_judges) as server:
        result = CliRunner().invoke(
            app,
            [
                "run",
                "--golden",
                golden,
                "--target",
                target,
                "--lake",
                lake,
                "--metrics",
                ",".join(METRICS),
                "--judge-base-url",
                server.url,
                "--judge-model",
                MAIN,
                "--judge-max-calls",
                "3",
                "--spot-check-model",
                SPOT,
                "--spot-check-share",
                "0.5",
                "--spot-check-min",
                "2",
            ],
        )
        assert result.exit_code == 0, result.output + repr(result.exception)
        assert server.count == 3
    [run_id] = re.search(r"landed run\(s\): (\S+)", result.output).groups()
    rows = judge_rows(lake, run_id)
    statuses = [r["status"] for r in rows.values()]
    assert statuses.count("ok") == 3  # three single-call steps got the three calls
    skipped = [r for r in rows.values() if r["status"] == "skipped"]
    assert len(skipped) + statuses.count("ok") == len(rows)
    assert {r["reason"] for r in skipped} == {"budget"}
    assert all(math.isnan(r["value"]) for r in skipped)
    assert f"{len(skipped)} judge metric value(s) were skipped: the judge budget ran out" in result.output
    figures = run_metrics(lake, run_id)
    assert figures["judge_calls"][0] == 3
    assert figures["judge_skipped_budget"][0] > 0
    assert "spot_check_n" not in figures  # the spot-check found no budget either


# ---- no judge -------------------------------------------------------------------------------------------


def test_no_judge_skips_judge_metrics_and_the_summary_says_how_to_configure_one(tmp_path):
    from raglake.cli import print_run_summary, render
    from raglake.flows.evaluate import evaluate

    golden, target = write_inputs(tmp_path / "inputs")
    lake = str(tmp_path / "lake")
    run_id = evaluate(RunSettings(golden=golden, target=target, lake=lake, metrics=METRICS))
    rows = judge_rows(lake, run_id)
    assert len(rows) == N_CASES * len(JUDGE_METRICS)
    assert {(r["status"], r["reason"]) for r in rows.values()} == {("skipped", "no_judge")}
    assert all(math.isnan(r["value"]) and r["judge_model"] is None for r in rows.values())
    [(models, versions)] = fetch(
        connect(Lake(lake)), "SELECT judge_models, prompt_version_map FROM runs WHERE run_id = $r", r=run_id
    )
    assert models is None and versions == {}
    assert fetch(connect(Lake(lake)), "SELECT count(*) FROM judge_calls") == [(0,)]
    with render.console.capture() as captured:
        print_run_summary(open_lake(lake), run_id)
    out = " ".join(captured.get().split())
    assert f"{len(rows)} judge metric value(s) were skipped: no judge is configured" in out
    assert "--judge-base-url" in out and "--judge-model" in out and "--judge local" in out
    assert "budget ran out" not in out
