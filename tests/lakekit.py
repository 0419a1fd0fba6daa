"""Landing runs in a test lake without Prefect (the flow's steps, called directly)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raglake.analysis import LakeQueries
from raglake.lake.duck import AFTER_RUN_MEMORY
from raglake.lake.tables import TABLES
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import all_metrics, metric_versions
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from tests.conftest import FIXTURES
from tests.rowpath import land_scored_run, score_batch


def land(lake: str, golden: str, target: str, run_id: str, *, minutes: int = 0, k: int = 5, **options) -> str:
    """Score `target` on `golden` and land it as `run_id`, started `minutes` after a fixed instant."""
    plan = plan_run(RunSettings(golden=golden, target=target, lake=lake, run_id=run_id, k=k, **options))
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=minutes)
    captures = plan.target.capture(plan.golden.cases)
    embedding = plan.embedding_spec()
    scored = score_batch(
        zip(plan.golden.cases, captures),
        plan.metrics,
        plan.config,
        encoder=embedding.encoder() if embedding else None,
        idf=embedding.idf if embedding else None,
    )
    run_level = all_metrics(level="run")
    values = [v for m in run_level for v in m.fn(RunInputs(captures))]
    record = plan.record(
        plan.started_at + dt.timedelta(seconds=5), len(captures), embedder_key=embedding.key if embedding else None
    )
    record.metric_versions.update(metric_versions(run_level))
    land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, values, plan.scoring_id)
    return run_id


# A hostile lake (tests/test_hostile_lake.py): runs landed as above, then damaged the ways a disk, a copy or
# a person damages files: cut short, overwritten with garbage, emptied, replaced by a Parquet file of another
# schema or by one whose column has another type.
MINI_GOLDEN = str(FIXTURES / "mini_golden.jsonl")
MINI_REPLAY = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
DAMAGE_KINDS = ("truncated", "garbage", "zero_bytes", "other_schema", "wrong_type")
HEALTHY_RUNS = ("r-two", "r-three")
# run -> (the table whose file of that run is damaged, how): each is left out whole (its rows are incomplete)
DAMAGED_RUNS = {
    "r-cut": ("scores", "truncated"),
    "r-empty": ("cases", "zero_bytes"),
    "r-noise": ("runs", "garbage"),
    "r-alien": ("chunks", "other_schema"),
    "r-typed": ("scores", "wrong_type"),
    "r-typed-row": ("runs", "wrong_type"),
}
WRONG_TYPE = {"scores": "value", "cases": "n_retrieved", "chunks": "rank", "runs": "n_cases", "judge_calls": "attempts"}


def damage(path: Path, kind: str, table: str) -> None:
    """Damage the file at `path` (of lake table `table`; a new file is written where there is none)."""
    if kind == "truncated":
        data = path.read_bytes() if path.exists() else _parquet_bytes(TABLES[table].schema.empty_table())
        path.write_bytes(data[: len(data) // 2])
    elif kind == "garbage":  # the magic bytes at both ends: only the footer tells it apart
        path.write_bytes(b"PAR1" + bytes(range(256)) * 8 + b"\x10\x00\x00\x00PAR1")
    elif kind == "zero_bytes":
        path.write_bytes(b"")
    elif kind == "other_schema":
        path.write_bytes(_parquet_bytes(pa.table({"x": [1, 2, 3], "y": ["a", "b", "c"]})))
    elif kind == "wrong_type":
        table_ = pq.read_table(path) if path.exists() else TABLES[table].schema.empty_table()
        column = WRONG_TYPE[table]
        i = table_.schema.get_field_index(column)
        path.write_bytes(_parquet_bytes(table_.set_column(i, column, table_.column(column).cast(pa.string()))))
    else:
        raise ValueError(kind)


def _parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def run_file(lake: str | Path, table: str, run_id: str) -> Path:
    """The run's own file of `table` (its runs row, or the one file of its partition)."""
    if table == "runs":
        (found,) = Path(lake).glob(f"runs/run_date=*/{run_id}.parquet")
    else:
        (found,) = [p for p in Path(lake).glob(f"{table}/run_id={run_id}/*.parquet") if p.name[:2] in ("r-", "s-")]
    return found


def healthy_lake(lake: str | Path) -> None:
    """The runs of the hostile lake, undamaged: the healthy ones and those to be damaged."""
    for i, run_id in enumerate((*HEALTHY_RUNS, *DAMAGED_RUNS)):
        land(str(lake), MINI_GOLDEN, MINI_REPLAY, run_id, minutes=i)


def stray_files(lake: str | Path) -> dict[Path, str]:
    """Foreign files (names raglake never gives) among a healthy run's files, in runs/ and in judge_calls/:
    each is skipped alone. Path -> the table it sits in."""
    lake = Path(lake)
    places = {
        **{lake / "scores" / "run_id=r-two" / f"stray-{kind}.parquet": "scores" for kind in DAMAGE_KINDS},
        lake / "runs" / "run_date=2026-01-01" / "stray.parquet": "runs",
        lake / "judge_calls" / "call_date=2026-01-01" / "calls-stray.parquet": "judge_calls",
    }
    return places


def make_hostile(lake: str | Path) -> list[Path]:
    """Damage a healthy_lake: every DAMAGED_RUNS file, and stray files beside healthy runs; returns every
    damaged file (each must be named once by a warning)."""
    damaged = []
    for run_id, (table, kind) in DAMAGED_RUNS.items():
        path = run_file(lake, table, run_id)
        damage(path, kind, table)
        damaged.append(path)
    strays = stray_files(lake)
    kinds = [*DAMAGE_KINDS, "garbage", "truncated"]
    for (path, table), kind in zip(strays.items(), kinds):
        path.parent.mkdir(parents=True, exist_ok=True)
        damage(path, kind, table)
        damaged.append(path)
    return damaged


def drop_runs(lake: str | Path, run_ids: list[str]) -> None:
    """Remove every file of these runs (what a lake without them holds)."""
    for run_id in run_ids:
        for path in [*Path(lake).glob(f"*/run_id={run_id}/*"), *Path(lake).glob(f"runs/run_date=*/{run_id}.parquet")]:
            path.unlink()


def spy_on_open_lake(monkeypatch, module) -> list[tuple[str | None, LakeQueries | None]]:
    """Every lake `module` opens from now on (raglake.pipeline.lakes: after_run's), with the memory limit asked for."""
    opened: list[tuple[str | None, LakeQueries]] = []
    real = module.open_lake

    def spy(lake=None, **options):
        opened.append((options.get("memory_limit"), None))  # asked for, whether or not it opens
        q = real(lake, **options)
        opened[-1] = (options.get("memory_limit"), q)
        return q

    monkeypatch.setattr(module, "open_lake", spy)
    return opened


def assert_capped_and_closed(opened: list[tuple[str | None, LakeQueries]]) -> None:
    """The summaries after a run: DuckDB capped at AFTER_RUN_MEMORY, every connection closed once done."""
    assert opened
    for limit, q in opened:
        assert limit == AFTER_RUN_MEMORY
        with pytest.raises(Exception, match="closed"):
            q.runs()
