"""A retry of a run whose commit failed (issue 10, item 1): whatever the retry's settings, the lake
ends with exactly the retry's rows, and the aborted attempt's files are gone."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raglake.errors import LakeError
from raglake.lake.query import connect, fetch, scalar
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from tests.conftest import FIXTURES
from tests.lakekit import land
from tests.rowpath import land_scored_run, score_batch

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
TARGET = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
RUN = "r-retry"
DAY = "2026-01-01"  # tests.lakekit starts runs on this day


def _block_commit(lake_dir: str) -> Path:
    """A plain file where the runs partition folder of DAY goes: every write before the commit works,
    the commit (the runs row) fails."""
    blocker = Path(lake_dir) / "runs" / f"run_date={DAY}"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a folder")
    return blocker


def _raw_scores(lake_dir: str, run_id: str = RUN) -> list[dict]:
    """Every score row of the run's partition, read as a plain Parquet reader would (no views)."""
    folder = Path(lake_dir) / "scores" / f"run_id={run_id}"
    return [row for f in sorted(folder.glob("*.parquet")) for row in pq.read_table(f).to_pylist()]


def _failed_attempt(lake_dir: str, **options) -> None:
    blocker = _block_commit(lake_dir)
    with pytest.raises(LakeError, match=f"run {RUN} was not landed, nothing of it is visible: cannot write"):
        land(lake_dir, GOLDEN, TARGET, RUN, **options)
    assert not Lake(lake_dir).files("runs")  # nothing committed
    blocker.unlink()


@pytest.mark.parametrize(
    "retry",
    [
        {"metrics": ["recall_any_at_k"]},  # fewer metrics
        {"metrics": ["recall_any_at_k", "mrr_at_k"], "k": 3},  # same metrics, another K
    ],
)
def test_retry_after_a_failed_commit_keeps_only_the_retrys_rows(lake_dir: str, retry: dict) -> None:
    _failed_attempt(lake_dir, metrics=["recall_any_at_k", "mrr_at_k"], k=5)
    assert {r["metric"] for r in _raw_scores(lake_dir)} == {"recall_any_at_k", "mrr_at_k"}  # the attempt's file

    land(lake_dir, GOLDEN, TARGET, RUN, **retry)
    wanted = set(retry["metrics"])
    raw = _raw_scores(lake_dir)
    pairs = [(r["case_id"], r["metric"]) for r in raw]
    assert len(pairs) == len(set(pairs)) == 4 * len(wanted)  # one row per case × metric, nothing stale
    assert {m for _, m in pairs} == wanted
    assert len({r["scoring_id"] for r in raw}) == 1

    q = open_lake(lake_dir)
    shown = {(r["metric"], r["n"]) for r in q.breakdown([RUN], "all")}
    assert {m for m, _ in shown} == wanted, shown
    assert scalar(q.con, "SELECT count(*) FROM scores WHERE run_id = $r", r=RUN) == 4 * len(wanted)
    assert scalar(q.con, "SELECT max(k) FROM runs") == retry.get("k", 5)


def test_retry_removes_every_table_file_of_the_aborted_attempt(lake_dir: str) -> None:
    """Files of tables the retry does not write (coverage here) and temp files of a killed writer go too."""
    _failed_attempt(lake_dir, metrics=["recall_any_at_k"])
    lake = Lake(lake_dir)
    stale_coverage = TABLES["coverage"].schema.empty_table()
    lake.write("coverage", RUN, stale_coverage, RUN)
    tmp = Path(lake_dir) / "scores" / f"run_id={RUN}" / ".s-dead.1234abcd.parquet.tmp"
    tmp.write_bytes(b"half a parquet file")
    runs_tmp = Path(lake_dir) / "runs" / f"run_date={DAY}" / f".{RUN}.1234abcd.parquet.tmp"
    runs_tmp.parent.mkdir(parents=True)
    runs_tmp.write_bytes(b"half a runs row")

    land(lake_dir, GOLDEN, TARGET, RUN, metrics=["mrr_at_k"])
    left = sorted(str(p.relative_to(lake_dir)) for p in Path(lake_dir).rglob("*") if p.is_file())
    assert not [f for f in left if f.endswith(".tmp")], left
    assert not [f for f in left if f.startswith("coverage/")], left
    assert {r["metric"] for r in _raw_scores(lake_dir)} == {"mrr_at_k"}


def test_a_committed_run_never_takes_rows_from_a_later_attempt(lake_dir: str) -> None:
    """A landing of an id that is already committed is refused before it touches the run's files,
    and the committed rows stay exactly as they were."""
    land(lake_dir, GOLDEN, TARGET, RUN, metrics=["recall_any_at_k"])
    before = {str(p): p.read_bytes() for p in Path(lake_dir).rglob("*") if p.is_file()}
    plan = plan_run(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, metrics=["mrr_at_k"]))
    plan.run_id = RUN  # as a second process that planned before the first one committed
    captures = plan.target.capture(plan.golden.cases)
    scored = score_batch(zip(plan.golden.cases, captures), plan.metrics, plan.config)
    record = plan.record(dt.datetime.now(dt.UTC), len(captures))
    with pytest.raises(LakeError, match="already in the lake"):
        land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, [], plan.scoring_id)
    after = {str(p): p.read_bytes() for p in Path(lake_dir).rglob("*") if p.is_file()}
    assert after == before
    con = connect(Lake(lake_dir))
    assert fetch(con, "SELECT DISTINCT metric FROM scores") == [("recall_any_at_k",)]


def test_temp_files_are_never_read(lake_dir: str) -> None:
    """A kill -9 mid-write leaves `.<stem>.<rand>.parquet.tmp`: no listing and no view picks it up."""
    land(lake_dir, GOLDEN, TARGET, RUN, metrics=["recall_any_at_k"])
    folder = Path(lake_dir) / "scores" / f"run_id={RUN}"
    (good,) = folder.glob("*.parquet")
    (folder / ".s-other.0000aaaa.parquet.tmp").write_bytes(good.read_bytes())  # even a complete one
    assert Lake(lake_dir).files("scores") == [str(good)]
    con = connect(Lake(lake_dir))
    assert scalar(con, "SELECT count(*) FROM scores") == 4
    assert os.path.exists(folder / ".s-other.0000aaaa.parquet.tmp")  # a committed run's folder is left alone


def test_a_write_never_replaces_a_file_even_when_the_existence_check_races(lake_dir: str, monkeypatch) -> None:
    """Two writers of one name may both pass `exists()`; on a local lake the second rename still refuses."""
    lake = Lake(lake_dir)
    empty = TABLES["coverage"].schema.empty_table()
    first = lake.write("coverage", RUN, empty, "part")
    before = Path(first).read_bytes()
    real_exists = type(lake.fs).exists
    monkeypatch.setattr(
        type(lake.fs),
        "exists",  # the check saw nothing
        lambda self, path, **kw: False if path == first else real_exists(self, path, **kw),
    )
    with pytest.raises(LakeError, match="append-only"):
        lake.write(
            "coverage",
            RUN,
            to_arrow(
                TABLES["coverage"], {"stat": ["docs"], "value": [1.0]}, optional=("index_version", "doc_type", "reason")
            ),
            "part",
        )
    monkeypatch.undo()
    assert Path(first).read_bytes() == before
    assert [p.name for p in Path(first).parent.iterdir()] == ["part.parquet"]  # no temp file left


def test_a_second_landing_of_the_same_run_at_the_same_time_commits_nothing(lake_dir: str, monkeypatch) -> None:
    """Another process writing files of the run while this one lands: the commit is refused."""
    original = Lake.write

    def meddling(self, table, partition, data, stem, **kw):
        path = original(self, table, partition, data, stem, **kw)
        if table == "labels":  # as another attempt of the same run id would
            original(self, "scores", partition, TABLES["scores"].schema.empty_table(), "s-other-attempt")
        return path

    monkeypatch.setattr(Lake, "write", meddling)
    with pytest.raises(LakeError, match="another process is landing run"):
        land(lake_dir, GOLDEN, TARGET, RUN)
    assert not Lake(lake_dir).files("runs")


def test_landing_is_a_commit_protocol_over_arrow_tables(lake_dir: str) -> None:
    """raglake.lake.landing lands any run-partitioned tables and then the runs row; it refuses what is
    no run's table and a runs row of another run before it writes anything."""
    from raglake.lake.landing import land_run

    lake = Lake(lake_dir)
    empty = {name: TABLES[name].schema.empty_table() for name in ("cases", "scores")}
    row = TABLES["runs"].schema.empty_table()
    with pytest.raises(LakeError, match="not judge_calls"):
        land_run(lake, RUN, dt.date(2026, 1, 1), {"judge_calls": TABLES["judge_calls"].schema.empty_table()}, row)
    with pytest.raises(LakeError, match=r"one row with that run_id, got \[\]"):
        land_run(lake, RUN, dt.date(2026, 1, 1), empty, row)
    assert lake.snapshot() == dict.fromkeys(TABLES, 0)
    cols = {name: [None] for name in TABLES["runs"].schema.names} | {"run_id": [RUN]}
    land_run(lake, RUN, dt.date(2026, 1, 1), empty, to_arrow(TABLES["runs"], cols))
    assert lake.snapshot() == {**dict.fromkeys(TABLES, 0), "cases": 1, "scores": 1, "runs": 1}
