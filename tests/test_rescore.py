"""`raglake rescore`: stored captures re-scored with the current registry, never through the target.
Nothing changed: every (run, metric) is a cache hit and nothing is written. A bumped metric version:
only that metric gets new rows, under one new scoring id; scores_latest shows them, the old rows stay
in `scores`. --metrics limits the work; --dry-run writes nothing and its judge-call estimate is what
the real re-score then sends (and a ledger hit is free); runs are chosen by id, dates or --all."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics import registry
from raglake.metrics.registry import Score
from raglake.pipeline.judging import JUDGE_RUNS
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings
from tests.conftest import ROOT
from tests.fake_openai import FakeOpenAI
from tests.lakekit import land

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

METRICS = ["recall_any_at_k", "mrr_at_k", "abstention_accuracy", "groundedness"]
GOLDEN = str(ROOT / "data" / "golden" / "sample.jsonl")
N_CASES = len(Path(GOLDEN).read_text().strip().splitlines())


def cli(*args: object, ok: bool = True):
    from raglake.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output + repr(result.exception)
    return result


def main_exit(monkeypatch, capsys, *args: object) -> tuple[int, str]:
    """`raglake ARGS` through the real entry point: its exit code and its output on one line."""
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *map(str, args)])
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, " ".join(capsys.readouterr().out.split())


def lake_files(lake: str) -> dict[str, bytes]:
    root = Path(lake)
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and not p.relative_to(root).parts[0].startswith("_")
    }


def rows(lake: str, sql: str, **params) -> list[tuple]:
    return fetch(connect(Lake(lake)), sql, **params)


def bump(monkeypatch, name: str, version: str, fn=None) -> None:
    """Register `name` again with a new version (and optionally a new function), as a code change would;
    a new function has no vectorised form (raglake.metrics.columnar) until one is written for it."""
    old = registry._REGISTRY[name]
    new = dataclasses.replace(old, version=version, fn=fn or old.fn)
    if fn is not None and hasattr(old, "columnar"):
        new = dataclasses.replace(new, columnar=None)
    monkeypatch.setitem(registry._REGISTRY, name, new)


def quarter(ctx) -> Score:
    return Score.ok(0.25)


def one_line(text: str) -> str:
    return " ".join(text.split())


# ---- one replayed run, landed through the command line -------------------------------------------------


@pytest.fixture(scope="module")
def landed(tmp_path_factory, prefect_harness) -> tuple[str, str]:
    """(lake, run id) of basic_search replayed from a copy of its capture file, which is then deleted:
    re-scoring can only read the captures from the lake."""
    tmp = tmp_path_factory.mktemp("rescore")
    captures = tmp / "captures.jsonl"
    shutil.copy(ROOT / "data" / "captures" / "basic_search.jsonl", captures)
    lake = str(tmp / "lake")
    out = cli("run", "--lake", lake, "--target", f"replay:{captures}", "--metrics", ",".join(METRICS)).output
    [run_id] = re.search(r"landed run\(s\): (\S+)", out).groups()
    captures.unlink()
    return lake, run_id


@pytest.fixture
def lake(landed, tmp_path) -> str:
    """A private copy of the landed lake (tests append to it)."""
    copy = tmp_path / "lake"
    shutil.copytree(landed[0], copy)
    return str(copy)


@pytest.fixture
def run_id(landed) -> str:
    return landed[1]


def scoring_ids(lake: str, run_id: str, table: str = "scores") -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for metric, sid in rows(lake, f"SELECT DISTINCT metric, scoring_id FROM {table} WHERE run_id = $r", r=run_id):
        out.setdefault(metric, set()).add(sid)
    return out


def test_nothing_changed_is_all_cache_hits_and_writes_nothing(lake, run_id):
    from raglake.flows.rescore import rescore

    before = lake_files(lake)
    out = one_line(cli("rescore", run_id, "--metrics", ",".join(METRICS), "--lake", lake).output)
    assert f"{run_id}: recomputed 0 metric(s) (0 rows), kept {len(METRICS)} unchanged" in out
    report = rescore(RescoreSettings(run_ids=[run_id], metrics=METRICS, lake=lake))
    r = report["runs"][run_id]
    assert (r["recompute"], r["keep"]) == (0, len(METRICS)) and "rows" not in r
    # retrieval: cache hits; groundedness and abstention_accuracy (which can ask a judge) are kept: no judge given
    assert r["by_reason"] == {"unchanged (cache hit)": 2, "kept: no judge given": 2}
    assert lake_files(lake) == before


def test_a_bumped_metric_gets_new_rows_under_one_new_scoring_id_and_wins_in_scores_latest(
    lake, run_id, landed, monkeypatch
):
    assert not Path(landed[0]).with_name("captures.jsonl").exists()  # the target is gone
    before = scoring_ids(lake, run_id)
    [original] = {sid for sids in before.values() for sid in sids}
    old_mrr = dict(
        rows(
            lake,
            "SELECT case_id, value FROM scores WHERE run_id = $r AND metric = 'mrr_at_k' AND status = 'ok'",
            r=run_id,
        )
    )
    assert old_mrr and set(old_mrr.values()) != {0.25}

    bump(monkeypatch, "mrr_at_k", "2-test", quarter)
    out = one_line(cli("rescore", run_id, "-m", ",".join(METRICS), "--lake", lake).output)
    assert f"recomputed 1 metric(s) ({N_CASES} rows), kept {len(METRICS) - 1} unchanged" in out

    after = scoring_ids(lake, run_id)
    [new] = after["mrr_at_k"] - {original}
    assert after == {**before, "mrr_at_k": {original, new}}  # no other metric got rows under the new id
    assert rows(lake, "SELECT metric, count(*) FROM scores WHERE scoring_id = $s GROUP BY ALL", s=new) == [
        ("mrr_at_k", N_CASES)
    ]
    latest = rows(
        lake,
        "SELECT metric, scoring_id, metric_version, count(*) FROM scores_latest WHERE run_id = $r "
        "GROUP BY ALL ORDER BY metric",
        r=run_id,
    )
    assert latest == sorted(
        [
            (
                m,
                new if m == "mrr_at_k" else original,
                {"mrr_at_k": "2-test"}.get(m, registry.get_metric(m).version),
                N_CASES,
            )
            for m in METRICS
        ]
    )
    # the newest values win: every case mrr scored before is 0.25 now; not-answerable ones stay undefined
    new_mrr = dict(
        rows(
            lake,
            "SELECT case_id, value FROM scores_latest WHERE run_id = $r AND metric = 'mrr_at_k' AND status = 'ok'",
            r=run_id,
        )
    )
    assert new_mrr == {cid: 0.25 for cid in old_mrr}
    assert (
        dict(
            rows(
                lake,
                "SELECT case_id, value FROM scores WHERE scoring_id = $s AND metric = 'mrr_at_k' AND status = 'ok'",
                s=original,
            )
        )
        == old_mrr
    )  # the old rows stay queryable
    [mrr] = [b for b in open_lake(lake).breakdown([run_id], "all") if b["metric"] == "mrr_at_k"]
    assert mrr["mean"] == pytest.approx(0.25) and mrr["n"] == len(old_mrr)

    files = lake_files(lake)
    out = one_line(cli("rescore", run_id, "-m", ",".join(METRICS), "--lake", lake).output)
    assert "recomputed 0 metric(s) (0 rows)" in out  # the new version is now the stored one
    assert lake_files(lake) == files


def test_metrics_option_limits_the_work_and_a_version_bump_alone_keeps_the_values(lake, run_id, monkeypatch):
    old = dict(
        rows(
            lake,
            "SELECT case_id, value FROM scores WHERE run_id = $r AND metric = 'recall_any_at_k' AND status = 'ok'",
            r=run_id,
        )
    )
    mrr_version = registry.get_metric("mrr_at_k").version
    bump(monkeypatch, "mrr_at_k", "2-limit", quarter)
    bump(monkeypatch, "recall_any_at_k", "2-limit")  # same function: the values must come back the same
    out = one_line(cli("rescore", run_id, "--metrics", "recall_any_at_k", "--lake", lake).output)
    assert f"recomputed 1 metric(s) ({N_CASES} rows), kept 0 unchanged" in out
    versions = dict(
        rows(
            lake, "SELECT metric, any_value(metric_version) FROM scores_latest WHERE run_id = $r GROUP BY ALL", r=run_id
        )
    )
    assert versions["recall_any_at_k"] == "2-limit" and versions["mrr_at_k"] == mrr_version
    assert (
        dict(
            rows(
                lake,
                "SELECT case_id, value FROM scores_latest WHERE run_id = $r AND metric = 'recall_any_at_k' "
                "AND status = 'ok'",
                r=run_id,
            )
        )
        == old
    )  # rebuilt from the captures in the lake

    out = one_line(cli("rescore", run_id, "-m", ",".join(METRICS), "--dry-run", "--lake", lake).output)
    assert f"run {run_id}: 1 to recompute, {len(METRICS) - 1} kept" in out
    assert "mrr_at_k" in out and f"metric version {mrr_version} → 2-limit" in out and "recall_any_at_k" not in out


def test_dry_run_says_what_would_be_recomputed_and_writes_nothing(lake, run_id, monkeypatch):
    landed = registry.get_metric("abstention_accuracy").version
    bump(monkeypatch, "abstention_accuracy", "3-test")
    before = lake_files(lake)
    out = one_line(cli("rescore", run_id, "--dry-run", "--lake", lake).output)  # every case-level metric
    case_metrics = registry.all_metrics(level="case")
    unscored = [m.name for m in case_metrics if m.name not in METRICS]
    assert f"run {run_id}: {len(unscored) + 1} to recompute, {len(METRICS) - 1} kept" in out
    assert "abstention_accuracy" in out and f"metric version {landed} → 3-test" in out
    assert out.count("not scored yet") == len(unscored)
    assert "judge calls: about 0 (0 already in the ledger, free)" in out
    assert lake_files(lake) == before


# ---- a judge: the estimate, the real calls, the ledger -------------------------------------------------


def estimate(out: str) -> tuple[int, int]:
    [(calls, free)] = re.findall(r"judge calls: about (\d+) \((\d+) already in the ledger, free\)", out)
    return int(calls), int(free)


def test_dry_run_judge_estimate_is_what_the_rescore_sends_and_the_ledger_makes_it_free(lake, run_id, monkeypatch):
    """groundedness (skipped at landing: no judge) and faithfulness (not scored: two prompts a case)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-rescore-test")
    with FakeOpenAI() as server:
        judge = ["--judge-base-url", server.url, "--judge-model", "gpt-4o-mini", "--lake", lake]
        before = lake_files(lake)
        dry = [
            one_line(cli("rescore", run_id, "-m", m, "--dry-run", *judge).output)
            for m in ("groundedness", "faithfulness", "groundedness,faithfulness")
        ]
        assert "was skipped: no judge" in dry[0] and "not scored yet" in dry[1]
        assert f"run {run_id}: 2 to recompute, 0 kept" in dry[2]
        (grounded, _), (faithful, _), (calls, free) = map(estimate, dry)
        assert grounded > 0 and faithful == 2 * grounded and calls == grounded + faithful and free == 0
        assert server.count == 0 and lake_files(lake) == before

        out = one_line(cli("rescore", run_id, "-m", "groundedness,faithfulness", *judge).output)
        assert "recomputed 2 metric(s)" in out
        assert server.count == calls, f"the dry run said {calls} judge calls, the re-score sent {server.count}"
        judged = rows(
            lake,
            "SELECT metric, status, judge_model, count(*) FROM scores_latest WHERE run_id = $r "
            "AND metric IN ('groundedness', 'faithfulness') AND status <> 'undefined' GROUP BY ALL "
            "ORDER BY metric",
            r=run_id,
        )
        assert judged == [
            ("faithfulness", "ok", "gpt-4o-mini", grounded),
            ("groundedness", "ok", "gpt-4o-mini", grounded),
        ]

        out = one_line(cli("rescore", run_id, "-m", "groundedness,faithfulness", *judge).output)
        assert "recomputed 0 metric(s)" in out and server.count == calls  # unchanged: a cache hit

        # recomputed, but every call is in the lake's ledger (read afresh, as a new process would)
        bump(monkeypatch, "groundedness", "2-test")
        JUDGE_RUNS.clear()
        out = one_line(cli("rescore", run_id, "-m", "groundedness,faithfulness", "--dry-run", *judge).output)
        assert f"run {run_id}: 1 to recompute, 1 kept" in out and estimate(out) == (grounded, grounded)
        out = one_line(cli("rescore", run_id, "-m", "groundedness,faithfulness", *judge).output)
        assert "recomputed 1 metric(s)" in out
        assert server.count == calls, f"{server.count - calls} call(s) for answers already in the ledger"
    assert rows(lake, "SELECT count(*) FROM judge_calls") == [(calls,)]
    versions = rows(
        lake,
        "SELECT DISTINCT metric_version, status FROM scores_latest WHERE run_id = $r "
        "AND metric = 'groundedness' AND status <> 'undefined'",
        r=run_id,
    )
    assert versions == [("2-test", "ok")]


# ---- choosing runs --------------------------------------------------------------------------------------

DAYS = {"r-jan01": 1, "r-jan03": 3, "r-jan09": 9}


@pytest.fixture(scope="module")
def dated(tmp_path_factory) -> str:
    """Three runs started on 2026-01-01, -03 and -09 (at noon)."""
    lake = str(tmp_path_factory.mktemp("dated") / "lake")
    target = f"replay:{ROOT / 'data' / 'captures' / 'local_search.jsonl'}"
    for run_id, day in DAYS.items():
        land(lake, GOLDEN, target, run_id, minutes=(day - 1) * 1440 + 720, metrics=["recall_any_at_k"])
    return lake


def planned(out: str) -> list[str]:
    return re.findall(r"run (r-jan\d\d): \d+ to recompute", out)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--since", "2026-01-02", "--until", "2026-01-05"], ["r-jan03"]),
        (["--since", "2026-01-03"], ["r-jan03", "r-jan09"]),  # both ends inclusive
        (["--until", "2026-01-03"], ["r-jan01", "r-jan03"]),
        (["--all"], ["r-jan01", "r-jan03", "r-jan09"]),
        (["r-jan09", "r-jan01"], ["r-jan09", "r-jan01"]),
        (["latest~1"], ["r-jan03"]),
    ],
)
def test_runs_are_chosen_by_id_date_range_or_all(dated, args, expected):
    out = one_line(cli("rescore", *args, "-m", "recall_any_at_k", "--dry-run", "--lake", dated).output)
    assert planned(out) == expected


def test_the_flow_rescores_the_runs_of_a_date_range(dated, monkeypatch):
    import datetime as dt

    from raglake.flows.rescore import rescore

    v = registry.get_metric("recall_any_at_k").version
    bump(monkeypatch, "recall_any_at_k", "2-dated")
    report = rescore(RescoreSettings(since=dt.date(2026, 1, 2), metrics=["recall_any_at_k"], lake=dated))
    assert sorted(report["runs"]) == ["r-jan03", "r-jan09"] and not report["dry_run"]
    assert [(r["recompute"], r["rows"]) for r in report["runs"].values()] == [(1, N_CASES)] * 2
    versions = rows(
        dated,
        "SELECT run_id, list(DISTINCT metric_version ORDER BY metric_version) FROM scores GROUP BY ALL ORDER BY run_id",
    )
    assert versions == [("r-jan01", [v]), ("r-jan03", sorted([v, "2-dated"])), ("r-jan09", sorted([v, "2-dated"]))]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "name the runs to re-score: run ids, or --since/--until dates, or --all"),
        (["r-jan01", "--all"], "name the runs to re-score"),
        (["r-nope"], "unknown run 'r-nope'"),
        (["--since", "2026-02-01"], "no run in the lake matches those dates"),
        (["--since", "01/02/2026"], "since (--since): takes a date as YYYY-MM-DD, got '01/02/2026'"),
        (["--all", "--metrics", "mrr_at_kk"], "unknown metric 'mrr_at_kk' (did you mean 'mrr_at_k'?)"),
    ],
)
def test_bad_selection_exits_2_with_a_clear_message(dated, monkeypatch, capsys, args, words):
    before = lake_files(dated)
    code, out = main_exit(monkeypatch, capsys, "rescore", *args, "--lake", dated)
    assert code == 2 and words in out, out
    assert lake_files(dated) == before


# ---- one pipeline: a forced re-score of an unchanged run reproduces it ----------------------------------

IDENTITY_METRICS = [
    "recall_any_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "semantic_similarity",
    "answer_correctness_emb",
    "bert_score_f1",
]


def test_a_forced_rescore_of_an_unchanged_run_reproduces_every_score_byte_for_byte(tmp_path, prefect_harness):
    """evaluate and rescore share one embed → judge → score pipeline: recomputing every metric of an
    unchanged run from its stored captures gives the very same values (float bits), statuses and
    reasons, BERTScore with run-level idf included. Scored in several batches, each recomputed (not a
    cache hit: the re-score keeps its task results elsewhere); the golden set is in case-id order so
    that the stored run's batches are the run's own."""
    from raglake.flows.evaluate import evaluate
    from raglake.flows.rescore import rescore

    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "".join(sorted(Path(GOLDEN).read_text().splitlines(keepends=True), key=lambda line: json.loads(line)["id"]))
    )
    lake = str(tmp_path / "lake")
    target = f"replay:{ROOT / 'data' / 'captures' / 'basic_search.jsonl'}"
    run_id = evaluate(
        RunSettings(
            golden=str(golden),
            target=target,
            lake=lake,
            metrics=IDENTITY_METRICS,
            batch_size=25,
            results=str(tmp_path / "results"),
            scoring={"bertscore_idf": True},
        )
    )
    report = rescore(RescoreSettings(run_ids=[run_id], metrics=IDENTITY_METRICS, lake=lake, batch_size=25, force=True))
    assert report["runs"][run_id]["recompute"] == len(IDENTITY_METRICS)
    by_scoring: dict[str, dict[tuple[str, str], tuple]] = {}
    stored = rows(
        lake,
        "SELECT scoring_id, case_id, metric, value, status, reason, metric_version, embedder "
        "FROM scores WHERE run_id = $r",
        r=run_id,
    )
    for sid, case_id, metric, value, *rest in stored:
        by_scoring.setdefault(sid, {})[(case_id, metric)] = (None if value is None else value.hex(), *rest)
    original, again = by_scoring.values()
    assert len(original) == N_CASES * len(IDENTITY_METRICS)
    assert again == original
    bert = [v for (_, metric), v in original.items() if metric == "bert_score_f1" and v[1] == "ok"]
    assert bert and all(":idf" in v[4] for v in bert)  # scored with idf weights
