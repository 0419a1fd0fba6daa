"""A user's Python metric in the scoring path and the lake: one case that raises lands as that case's
`metric_error` row (per-case and columnar scoring alike) and counts as failed in the breakdown, never
stopping the run; a built-in metric that raises is still a bug that stops it; and `rescore` compares a
user metric's version (its code hash) so that editing the function recomputes exactly that metric."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raglake.columnar.batch import ColumnarBatch
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics import plugins, registry
from raglake.metrics.context import ScoringConfig
from raglake.metrics.plugins import load_plugins
from raglake.metrics.registry import get_metric, metric_versions
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.rescore import plan_rescore
from raglake.pipeline.scoring import score_columnar
from raglake.pipeline.staging import stage_pairs
from raglake.schemas import Capture, GoldenCase
from raglake.tasks.score import ScoreSettings
from tests.lakekit import MINI_GOLDEN, MINI_REPLAY, land
from tests.rowpath import score_batch

MINI_CAPTURES = MINI_REPLAY.removeprefix("replay:")

CHECKS = textwrap.dedent(
    """
    import raglake


    @raglake.metric("short_answer")
    def short_answer(case):
        return None if case.answer is None else float(len(case.answer) <= {limit})


    @raglake.metric("picky", inputs=("answer",))
    def picky(case):
        if case.id == "c2":
            raise ValueError(f"cannot read {{case.id}}")
        return 1.0
    """
).lstrip()


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(plugins, "_FILES", {})
    monkeypatch.setattr(plugins, "_MODULES", {})


def checks(folder: Path, limit: int = 400) -> list[str]:
    (folder / "checks.py").write_text(CHECKS.format(limit=limit), encoding="utf-8")
    return load_plugins(["checks.py"], str(folder))


def _pairs() -> list[tuple[GoldenCase, Capture]]:
    cases = [GoldenCase.model_validate_json(line) for line in Path(MINI_GOLDEN).read_text().splitlines()]
    captures = [Capture.model_validate_json(line) for line in Path(MINI_CAPTURES).read_text().splitlines()]
    return list(zip(cases, captures))


def _rows(scores: dict[str, list]) -> dict[tuple[str, str], tuple]:
    return {
        (c, m): (s, r, None if isinstance(v, float) and math.isnan(v) else v)
        for c, m, s, r, v in zip(
            scores["case_id"], scores["metric"], scores["status"], scores["reason"], scores["value"]
        )
    }


def test_a_case_that_raises_is_a_metric_error_row_in_both_scoring_paths(tmp_path):
    names = checks(tmp_path)
    metrics = [get_metric(n) for n in [*names, "recall_any_at_k"]]
    per_case = _rows(score_batch(_pairs(), metrics, ScoringConfig()).scores)
    columnar = _rows(
        score_columnar(ColumnarBatch.from_files(MINI_GOLDEN, MINI_CAPTURES), metrics, ScoringConfig()).scores
    )
    assert per_case == columnar
    assert per_case[("c2", "picky")] == ("metric_error", "ValueError: cannot read c2 (at checks.py:12)", None)
    assert per_case[("c1", "picky")] == ("ok", None, 1.0)
    assert per_case[("c2", "short_answer")] == ("ok", None, 1.0)  # the other metrics of the case are unaffected
    assert per_case[("c2", "recall_any_at_k")][0] == "ok"


def test_a_builtin_metric_that_raises_is_still_a_bug_that_stops_the_batch(monkeypatch):
    def broken(ctx):
        raise RuntimeError("a bug in raglake")

    old = registry._REGISTRY["mrr_at_k"]
    monkeypatch.setitem(registry._REGISTRY, "mrr_at_k", dataclasses.replace(old, fn=broken, columnar=None))
    with pytest.raises(RuntimeError, match="a bug in raglake"):
        score_batch(_pairs(), [get_metric("mrr_at_k")], ScoringConfig())
    with pytest.raises(RuntimeError, match="a bug in raglake"):
        score_columnar(ColumnarBatch.from_files(MINI_GOLDEN, MINI_CAPTURES), [get_metric("mrr_at_k")], ScoringConfig())


def test_metric_error_rows_land_and_count_as_failed_in_the_breakdown(tmp_path):
    checks(tmp_path)
    lake = str(tmp_path / "lake")
    land(lake, MINI_GOLDEN, MINI_REPLAY, "r-own", metrics=["short_answer", "picky", "recall_any_at_k"])
    rows = fetch(
        connect(Lake(lake)),
        "SELECT case_id, status, reason, metric_version FROM scores WHERE metric = 'picky' ORDER BY case_id",
    )
    # c4's capture failed: undefined before the function is called, as for a built-in metric
    assert [r[:2] for r in rows] == [("c1", "ok"), ("c2", "metric_error"), ("c3", "ok"), ("c4", "undefined")]
    assert rows[1][2] == "ValueError: cannot read c2 (at checks.py:12)"
    assert {r[3] for r in rows} == {get_metric("picky").version}
    [picky] = [b for b in open_lake(lake).breakdown(["r-own"], "all") if b["metric"] == "picky"]
    assert (picky["n"], picky["n_failed"], picky["n_undefined"]) == (2, 1, 1)
    landed = fetch(connect(Lake(lake)), "SELECT version, origin, source FROM metrics WHERE metric = 'picky'")
    assert landed == [(get_metric("picky").version, "plugin", "checks.py:9")]


def test_rescore_recomputes_exactly_the_user_metric_whose_code_changed(tmp_path):
    checks(tmp_path)
    lake = str(tmp_path / "lake")
    land(lake, MINI_GOLDEN, MINI_REPLAY, "r-own", metrics=["short_answer", "picky", "recall_any_at_k"])
    q = open_lake(lake)

    def decide() -> dict[str, tuple[bool, str]]:
        chosen = [get_metric(n) for n in ("short_answer", "picky", "recall_any_at_k")]
        return {
            d.metric: (d.compute, d.reason)
            for d in plan_rescore(q, ["r-own"], chosen, embedder_key=None, judge_model=None)
        }

    assert decide() == {n: (False, "unchanged (cache hit)") for n in ("short_answer", "picky", "recall_any_at_k")}
    before = get_metric("short_answer").version
    checks(tmp_path, limit=10)  # the user edits the function
    after = get_metric("short_answer").version
    assert after != before and after.split("+")[0] == before.split("+")[0]
    assert decide() == {
        "short_answer": (True, f"metric version {before} → {after}"),
        "picky": (False, "unchanged (cache hit)"),
        "recall_any_at_k": (False, "unchanged (cache hit)"),
    }


@pytest.mark.flow
def test_the_rescore_flow_lands_new_rows_for_the_edited_metric_only(tmp_path, prefect_harness):
    from raglake.flows.rescore import rescore
    from raglake.pipeline.rescore_settings import RescoreSettings

    checks(tmp_path)
    lake = str(tmp_path / "lake")
    land(lake, MINI_GOLDEN, MINI_REPLAY, "r-own", metrics=["short_answer", "picky", "recall_any_at_k"])
    checks(tmp_path, limit=10)  # every mini answer is longer than 10 characters: 1.0 becomes 0.0
    settings = RescoreSettings(run_ids=["r-own"], metrics=["short_answer", "picky", "recall_any_at_k"], lake=lake)
    report = rescore(settings)["runs"]["r-own"]
    assert (report["recompute"], report["keep"]) == (1, 2)
    latest = fetch(
        connect(Lake(lake)),
        "SELECT metric, list(DISTINCT metric_version), list(value ORDER BY case_id) FILTER (WHERE status = 'ok') "
        "FROM scores_latest WHERE run_id = 'r-own' AND metric = 'short_answer' GROUP BY ALL",
    )
    assert latest == [("short_answer", [get_metric("short_answer").version], [0.0, 0.0, 0.0])]
    assert json.dumps(report["by_reason"]).count("metric version") == 1


WORKER = """
import pickle, sys
import pyarrow.parquet as pq
from raglake.pipeline.staging import Store
from raglake.tasks.score import score_cases

batch, settings = pickle.loads(open(sys.argv[1], "rb").read())
ref = score_cases.fn(batch, settings)
store = Store(batch.results)
table = pq.read_table(store.path(f"{ref.folder}/scores.parquet"), filesystem=store.fs)
print(sorted(set(zip(table["metric"].to_pylist(), table["status"].to_pylist()))))
"""


def test_a_scoring_worker_in_another_process_scores_the_users_metrics(tmp_path):
    """A Dask worker unpickles the task's settings in a process that never loaded the plugin (and cannot:
    the file is gone); the run's own metrics travel with the settings, their code by value."""
    import cloudpickle

    checks(tmp_path)
    metrics = [get_metric(n) for n in ("short_answer", "picky", "recall_any_at_k")]
    pairs = _pairs()
    [batch] = stage_pairs(str(tmp_path / "results"), [c for c, _ in pairs], [c for _, c in pairs], 10, "test")
    settings = ScoreSettings.of(metric_versions(metrics), ScoringConfig(), frozenset(), None)
    blob = tmp_path / "task.pkl"
    blob.write_bytes(cloudpickle.dumps((batch, settings)))
    (tmp_path / "checks.py").unlink()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = subprocess.run([sys.executable, str(script), str(blob)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(
        [
            ("picky", "metric_error"),
            ("picky", "ok"),
            ("picky", "undefined"),
            ("recall_any_at_k", "ok"),
            ("recall_any_at_k", "undefined"),
            ("short_answer", "ok"),
            ("short_answer", "undefined"),
        ]
    )


def test_an_unknown_metric_error_pickles_whole_from_a_worker():
    """A worker's UnknownNameError reached the flow as "TypeError: UnknownNameError.__init__() missing 2
    required positional arguments" (Dask pickles a task's exception)."""
    import pickle

    from raglake.errors import UnknownNameError

    e = UnknownNameError("metric", "short_answr", ["short_answer", "picky"])
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is UnknownNameError and str(again) == str(e)
    assert "did you mean 'short_answer'?" in str(again)
