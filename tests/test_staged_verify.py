"""Staged results are used only when they are still what was written (issue 25): a staged file found again
by its content key must still have the sha256 recorded when it was written (its name for the files named by
it; the captures' `.sha256` marker; the scored batch's `_done`). Tampered with, cut short or emptied, it is
staged anew with one warning naming it, and the run lands exactly what a clean run lands; never the
tampered values, never a crash (`ArrowInvalid: Parquet magic bytes not found` poisoned every re-run)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from raglake.errors import LakeError
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics.registry import metric_versions
from raglake.pipeline.finish import capture_facts, finish_run
from raglake.pipeline.plan import plan_run
from raglake.pipeline.rows import land_staged_run
from raglake.pipeline.settings import RunSettings
from raglake.pipeline.staging import find_scored, stage_judged
from raglake.tasks.capture import capture_batch
from raglake.tasks.score import ScoreSettings, score_cases
from tests.lakekit import MINI_GOLDEN, MINI_REPLAY

METRICS = ["recall_any_at_k", "mrr_at_k", "ndcg_at_k", "abstention_accuracy", "grounding_presence_rate"]
DAMAGES = ("tampered", "truncated", "zero_bytes")
# staged file -> (its glob under the results location, the lake column a tampered copy would change)
STAGED = {
    "scored-scores": ("scored/*/*/scores.parquet", "scores"),
    "scored-cases": ("scored/*/*/cases.parquet", "cases"),
    "captures": ("captures/*/*.jsonl", "cases"),
    "cases-batch": ("batches/*/*.cases.jsonl", "cases"),
}


def staged_run(lake: str, results: str, run_id: str) -> str:
    """The evaluate flow's steps on the staged files, without Prefect: stage → capture → score → land."""
    settings = RunSettings(
        golden=MINI_GOLDEN, target=MINI_REPLAY, lake=lake, results=results, run_id=run_id, metrics=METRICS, batch_size=2
    )
    plan = plan_run(settings)
    captured = [capture_batch.fn(plan.target, b, plan.run_id) for b in plan.stage()]
    score = ScoreSettings.of(metric_versions(plan.metrics), plan.config, plan.target.known_docs(), None)
    scored = [score_cases.fn(b, score) for b in captured]
    finished = plan.started_at + dt.timedelta(seconds=1)
    record, values, coverage = finish_run(plan, capture_facts(scored), finished, suite_seconds=1.0, stage_seconds={})
    land_staged_run(plan.lake, record, scored, values, plan.scoring_id, coverage)
    return run_id


def landed(lake: str, run_id: str) -> str:
    """What a run landed that the staged files decide: its scores and its cases (repr: NaN equals NaN)."""
    con = connect(Lake(lake))
    scores = fetch(con, "SELECT case_id, metric, value, status FROM scores WHERE run_id = $r ORDER BY ALL", r=run_id)
    cases = fetch(con, "SELECT case_id, question, answer FROM cases WHERE run_id = $r ORDER BY ALL", r=run_id)
    return repr((scores, cases))


def _tamper_parquet(path: Path) -> None:
    table = pq.read_table(path)
    column, value = ("value", 0.123) if "value" in table.column_names else ("answer", "TAMPERED")
    i = table.schema.get_field_index(column)
    constant = pa.array([value] * table.num_rows, table.schema.field(column).type)
    pq.write_table(table.set_column(i, column, constant), path)


def damage_staged(path: Path, how: str) -> None:
    if how == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    elif how == "zero_bytes":
        path.write_bytes(b"")
    elif path.suffix == ".parquet":
        _tamper_parquet(path)
    else:  # a JSON line's text changed: still valid, still parsed
        field = b'"answer":"' if "captures" in str(path) else b'"question":"'
        data = path.read_bytes()
        assert field in data
        path.write_bytes(data.replace(field, field + b"TAMPERED ", 1))


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("staged", list(STAGED))
def test_a_damaged_staged_file_is_staged_anew_and_the_run_lands_clean_values(
    tmp_path: Path, staged: str, how: str, capsys
) -> None:
    lake, results = str(tmp_path / "lake"), str(tmp_path / "results")
    clean = landed(lake, staged_run(lake, results, "r-first"))
    files = sorted(Path(results).glob(STAGED[staged][0]))
    assert files
    for path in files:
        damage_staged(path, how)
    capsys.readouterr()
    again = landed(lake, staged_run(lake, results, "r-again"))
    err = capsys.readouterr().err
    assert again == clean
    for path in files:
        assert err.count(f"staged file {path} does not match the sha256") == 1, err
    assert landed(lake, staged_run(lake, results, "r-third")) == clean
    assert "warning" not in capsys.readouterr().err  # staged anew: sound again


def test_a_scored_batch_staged_without_digests_is_scored_again(tmp_path: Path) -> None:
    """A `_done` of an older raglake (row counts only) cannot vouch for its tables: scored again."""
    lake, results = str(tmp_path / "lake"), str(tmp_path / "results")
    staged_run(lake, results, "r-first")
    for done in Path(results).glob("scored/*/*/_done"):
        counts = json.loads(done.read_bytes())
        done.write_text(json.dumps({"cases": counts["cases"], "scores": counts["scores"]}))
        key = done.parent.name
        assert find_scored(results, 0, key) is None
    for scores in Path(results).glob("scored/*/*/scores.parquet"):
        _tamper_parquet(scores)
    staged_run(lake, results, "r-again")
    means = "SELECT metric, avg(value) FROM scores WHERE run_id = $r GROUP BY ALL ORDER BY ALL"
    con = connect(Lake(lake))
    assert repr(fetch(con, means, r="r-again")) == repr(fetch(con, means, r="r-first"))


def test_staged_judge_outcomes_are_checked_where_found_and_where_read(tmp_path: Path, capsys) -> None:
    """Judge outcomes are named by their sha256: a tampered file is written again when found, and a
    reference to one that changed since is one LakeError naming it, not a silent verdict."""
    plan = plan_run(
        RunSettings(golden=MINI_GOLDEN, target=MINI_REPLAY, lake=str(tmp_path / "lake"), results=str(tmp_path / "r"))
    )
    (batch, *_) = plan.stage()
    outcomes = {c.id: {} for c in batch.read_cases()}
    judged = stage_judged(batch, "r-judged", outcomes)
    path = Path(tmp_path / "r" / judged.judged)
    assert judged.read_judged() == outcomes
    path.write_text(json.dumps({c: {} for c in list(outcomes)[:1]}))
    with pytest.raises(LakeError, match=f"staged file {path} changed since this run wrote it"):
        judged.read_judged()
    assert stage_judged(batch, "r-judged", outcomes) == judged
    assert f"staged file {path} does not match the sha256" in capsys.readouterr().err
    assert judged.read_judged() == outcomes


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_the_probe_tampered_scores_never_land(tmp_path: Path, monkeypatch, capsys) -> None:
    """The probe as a user runs it: every `value` of the staged scores set to 0.123, then `raglake run`
    again on the same inputs: before the fix, every mean of the second run was 0.123."""
    from raglake.cli import main

    lake = str(tmp_path / "lake")

    def run(run_id: str) -> None:
        args = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--run-id", run_id, "--lake", lake, "-q"]
        monkeypatch.setattr(sys, "argv", ["raglake", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        assert (exited.value.code or 0) == 0, capsys.readouterr()

    run("r-first")
    staged = sorted(Path(lake, "_results").glob("scored/*/*/scores.parquet"))
    assert staged
    for path in staged:
        table = pq.read_table(path)
        value = pc.if_else(pc.is_valid(table["value"]), 0.123, table["value"])
        pq.write_table(table.set_column(table.schema.get_field_index("value"), "value", value), path)
    capsys.readouterr()
    run("r-second")
    err = capsys.readouterr().err
    assert all(f"staged file {p} does not match" in err for p in staged), err
    con = connect(Lake(lake))
    means = "SELECT metric, avg(value) FROM scores WHERE run_id = $r AND status = 'ok' GROUP BY ALL ORDER BY ALL"
    first, second = fetch(con, means, r="r-first"), fetch(con, means, r="r-second")
    assert repr(second) == repr(first) and any(m not in (None, 0.123) and m == m for _, m in first)


def test_a_done_marker_with_digests_but_no_counts_is_not_trusted(tmp_path: Path) -> None:
    """A damaged `_done` holding digests but no row counts made find_scored raise a KeyError traceback."""
    from raglake.pipeline.staging import SCORED_TABLES, Store, scored_folder

    store, folder = Store(str(tmp_path / "results")), scored_folder("score-" + "0" * 32)
    digests = {name: store.put_table(f"{folder}/{name}.parquet", pa.table({"x": [1]})) for name in SCORED_TABLES}
    store.put(f"{folder}/_done", json.dumps({"sha256": digests}).encode())
    assert find_scored(str(tmp_path / "results"), 0, "score-" + "0" * 32) is None
