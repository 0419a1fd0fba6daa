"""The lake: hive layout, schemas defined once, append-only atomic writes, runs visible only
once committed, and nothing lost when a landing fails half-way."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raglake.errors import LakeError
from raglake.lake.query import fetch, scalar
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from raglake.pipeline.lakes import connect_lake
from tests.conftest import FIXTURES
from tests.lakekit import land

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
TARGET = f"replay:{FIXTURES / 'mini_captures.jsonl'}"


def _fingerprint(root: str) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file()
    }


def test_layout_is_hive_partitioned_with_one_file_per_table(lake_dir: str) -> None:
    land(lake_dir, GOLDEN, TARGET, "r-one")
    files = sorted(str(Path(p).relative_to(lake_dir)) for p in Path(lake_dir).rglob("*.parquet"))
    assert files == sorted(
        [
            "cases/run_id=r-one/r-one.parquet",
            "chunks/run_id=r-one/r-one.parquet",
            "labels/run_id=r-one/r-one.parquet",
            "run_metrics/run_id=r-one/r-one.parquet",
            "runs/run_date=2026-01-01/r-one.parquet",
            next(f for f in files if f.startswith("scores/run_id=r-one/s-")),
        ]
        + [f for f in files if f.startswith(("sentence_scores/run_id=r-one/s-", "metrics/run_id=r-one/s-"))]
    )
    scoring = next(f for f in files if f.startswith("scores/")).rsplit("/", 1)[1]
    assert f"metrics/run_id=r-one/{scoring}" in files  # what the metrics meant, landed with the scoring
    for f in files:
        table = pq.read_table(Path(lake_dir) / f)
        assert table.schema == TABLES[f.split("/")[0]].schema  # partition column only in the path


def test_every_case_metric_has_a_row_per_case(lake_dir: str) -> None:
    land(lake_dir, GOLDEN, TARGET, "r-one")
    con = connect_lake(lake_dir)
    n_metrics = scalar(con, "SELECT count(*) FROM metric_registry WHERE level = 'case'")
    assert scalar(con, "SELECT count(*) FROM scores") == 4 * n_metrics
    # failed capture: every metric undefined with reason capture_failed, value NaN. (NaN is checked in
    # Arrow: DuckDB 2.0 prunes parquet row groups wrongly for isnan() filters, so SQL filters on status.)
    rows = fetch(con, "SELECT value, status, reason FROM scores WHERE case_id = 'c4'")
    assert len(rows) == n_metrics
    assert all(math.isnan(v) and s == "undefined" and r == "capture_failed" for v, s, r in rows)
    values = con.sql("SELECT value, status FROM scores").to_arrow_table().to_pylist()
    assert all(math.isnan(r["value"]) == (r["status"] != "ok") for r in values)


def test_append_only_refuses_to_overwrite(lake_dir: str) -> None:
    lake = Lake(lake_dir)
    empty = TABLES["coverage"].schema.empty_table()
    lake.write("coverage", "r-x", empty, "part")
    with pytest.raises(LakeError, match="append-only"):
        lake.write("coverage", "r-x", empty, "part")
    with pytest.raises(LakeError, match="schema"):
        lake.write("coverage", "r-x", pa.table({"x": [1]}), "other")
    with pytest.raises(LakeError, match="characters"):
        lake.write("coverage", "../escape", empty, "part")


def test_a_landed_run_id_cannot_be_reused(lake_dir: str) -> None:
    land(lake_dir, GOLDEN, TARGET, "r-one")
    before = _fingerprint(lake_dir)
    with pytest.raises(Exception, match="already in the lake"):
        land(lake_dir, GOLDEN, TARGET, "r-one")
    assert _fingerprint(lake_dir) == before


def test_a_landing_that_fails_half_way_is_invisible_and_retry_succeeds(lake_dir: str, monkeypatch) -> None:
    land(lake_dir, GOLDEN, TARGET, "r-good")
    before = _fingerprint(lake_dir)
    original, calls = Lake.write, []

    def flaky(self, table, *args, **kwargs):
        calls.append(table)
        if table == "labels":
            raise OSError("disk full")
        return original(self, table, *args, **kwargs)

    monkeypatch.setattr(Lake, "write", flaky)
    with pytest.raises(OSError):
        land(lake_dir, GOLDEN, TARGET, "r-crash", minutes=1)
    after = _fingerprint(lake_dir)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing landed before was touched
    assert not [k for k in after if k.endswith(".tmp")]  # no temp files left
    con = connect_lake(lake_dir)
    assert scalar(con, "SELECT list(DISTINCT run_id) FROM scores") == ["r-good"]
    assert scalar(con, "SELECT count(*) FROM cases WHERE run_id = 'r-crash'") == 0
    monkeypatch.setattr(Lake, "write", original)
    land(lake_dir, GOLDEN, TARGET, "r-crash", minutes=1)  # the retry replaces its own uncommitted files
    con = connect_lake(lake_dir)
    assert scalar(con, "SELECT count(*) FROM cases WHERE run_id = 'r-crash'") == 4


def test_fsspec_memory_filesystem_round_trip() -> None:
    lake = Lake("memory://raglake-test-lake")
    land(lake.url, GOLDEN, TARGET, "r-mem")
    con = connect_lake("memory://raglake-test-lake")
    assert scalar(con, "SELECT count(DISTINCT case_id) FROM cases") == 4
    assert scalar(con, "SELECT count(*) FROM runs") == 1


def test_a_column_the_builder_forgets_is_an_error_not_nulls() -> None:
    from raglake.lake.tables import to_arrow

    full = {name: [None] for name in TABLES["labels"].schema.names}
    assert to_arrow(TABLES["labels"], full).num_rows == 1
    forgot = {k: v for k, v in full.items() if k != "label_source"}
    with pytest.raises(LakeError, match=r"labels.*label_source"):
        to_arrow(TABLES["labels"], forgot)
    assert to_arrow(TABLES["labels"], forgot, optional=("label_source",)).column("label_source").null_count == 1
    with pytest.raises(LakeError, match="lengths"):
        to_arrow(TABLES["labels"], {**full, "rank": [1, 2]})
