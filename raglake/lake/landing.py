"""Landing one run: the commit protocol over Arrow tables. Every run-partitioned table's rows for the
run are written file by file, the `runs` row last (a run becomes visible to readers only when that
row exists). What the rows hold is the pipeline's business (raglake.pipeline.rows)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping

import pyarrow as pa

from raglake.errors import LakeError, LakeWriteError
from raglake.lake.checks import check_lake_root
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES

RUN_TABLES = tuple(name for name, spec in TABLES.items() if spec.partition == "run_id")


def is_committed(lake: Lake, run_id: str) -> bool:
    """Whether the run's runs file exists (sound or not: a damaged one still takes its id)."""
    return any(f"/{run_id}.parquet" in f.replace("\\", "/") for f in lake.listed("runs"))


def clear_uncommitted(lake: Lake, run_id: str) -> list[str]:
    """Remove whatever earlier attempts of an uncommitted run left: every file of the run in every
    run_id-partitioned table, whatever its name or the settings it was written with, and the temp
    files of an interrupted commit. Returns what was removed.

    An uncommitted run has no visible rows by definition, so nothing a reader could see goes."""
    if is_committed(lake, run_id):
        raise LakeError(f"run {run_id} is already in the lake at {lake.url}; choose another --run-id")
    stale = [f for name in RUN_TABLES for f in lake.partition_files(name, run_id)] + lake.temp_files("runs", run_id)
    lake.remove(stale)
    return stale


def _check(run_id: str, tables: Mapping[str, object], runs_row: pa.Table) -> None:
    wrong = sorted(set(tables) - set(RUN_TABLES))
    if wrong:
        raise LakeError(
            f"a run lands only its run-partitioned tables ({', '.join(RUN_TABLES)}), not {', '.join(wrong)}"
        )
    ids = runs_row.column("run_id").to_pylist() if "run_id" in runs_row.column_names else []
    if ids != [run_id]:
        raise LakeError(f"the runs row of run {run_id} must be one row with that run_id, got {ids}")


def land_run(
    lake: Lake,
    run_id: str,
    run_date: dt.date,
    tables: Mapping[str, pa.Table | Iterable[pa.Table]],
    runs_row: pa.Table,
    *,
    stems: Mapping[str, str] | None = None,
) -> None:
    """Clear what earlier attempts of the run left, write its `tables` (table name -> rows of that
    table's schema, or parts of them streamed into the file; one file each, named `stems[name]` or the
    run id), then the `runs_row`. A second
    process landing the same run at the same time makes this one fail with nothing committed."""
    _check(run_id, tables, runs_row)
    if lake.is_local:
        check_lake_root(lake.root, write=True)  # a read-only lake: said before any file is written
    stems = stems or {}
    clear_uncommitted(lake, run_id)
    written = {_write(lake, run_id, name, table, stems.get(name, run_id)) for name, table in tables.items()}
    found = {f for name in RUN_TABLES for f in lake.partition_files(name, run_id)}
    if found != written or is_committed(lake, run_id):
        raise LakeError(
            f"another process is landing run {run_id} in {lake.url} at the same time; "
            "nothing was committed: run it again with another --run-id"
        )
    _write(lake, run_id, "runs", runs_row, run_id, run_date.isoformat())


def _write(lake: Lake, run_id: str, table: str, data: object, stem: str, partition: str | None = None) -> str:
    """One file of the run; a failed write (a full disk) says that nothing of the run is visible: the
    runs row, written last, is not there."""
    try:
        return lake.write(table, partition or run_id, data, stem)  # type: ignore[arg-type]
    except LakeWriteError as e:
        raise LakeWriteError(f"run {run_id} was not landed, nothing of it is visible: {e}") from None
