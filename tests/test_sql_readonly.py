"""The lake is read-only to queries: `raglake sql` runs queries only, and no statement on a lake
connection can write a file, read a file outside the lake's own, attach, install or load anything, or
unlock the settings that forbid it (issue 10, item 9)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

from raglake.errors import ConfigError
from raglake.lake.query import run_sql
from raglake.lake.store import Lake
from raglake.pipeline.lakes import connect_lake
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

GOLDEN, TARGET = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"


def _lake_bytes(lake: Lake) -> dict[str, bytes]:
    """Every file under the lake root (temp files and folders' contents included), by path."""
    return {path: lake.fs.cat_file(path) for path in lake.fs.find(lake.root)}


@pytest.fixture(params=["local", "memory"])
def lake(request, tmp_path: Path) -> Lake:
    url = str(tmp_path / "lake") if request.param == "local" else f"memory://raglake-sqlro-{uuid.uuid4().hex[:8]}"
    land(url, GOLDEN, TARGET, "r-one")
    land(url, GOLDEN, TARGET, "r-two", minutes=1)
    return Lake(url)


def _refused(tmp_path: Path, lake: Lake) -> list[str]:
    committed = lake.files("scores")[0]
    return [
        f"COPY (SELECT 1 AS x) TO '{tmp_path / 'out.parquet'}'",
        f"COPY (SELECT * FROM scores) TO '{committed}' (FORMAT parquet)",  # over a committed lake file
        f"COPY scores TO '{tmp_path / 'out.csv'}'",
        f"EXPLAIN ANALYZE COPY (SELECT 1) TO '{tmp_path / 'explained.csv'}'",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "CREATE TABLE t AS SELECT 1 AS x",
        "SELECT 1; DROP VIEW scores",
        "INSERT INTO runs SELECT * FROM runs",
        "PRAGMA enable_external_access",
        f"EXPORT DATABASE '{tmp_path / 'export'}'",
    ]


def test_statements_other_than_queries_are_refused_and_the_lake_is_unchanged(lake: Lake, tmp_path: Path) -> None:
    before = _lake_bytes(lake)
    con = connect_lake(lake)
    for statement in _refused(tmp_path, lake):
        with pytest.raises(ConfigError, match="read-only to queries"):
            run_sql(con, statement)
    assert _lake_bytes(lake) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["lake"] if lake.is_local else [])
    assert run_sql(con, "SELECT count(*) AS n FROM runs").column("n").to_pylist() == [2]  # the views still stand


def test_queries_cannot_read_files_outside_the_lake(lake: Lake, tmp_path: Path) -> None:
    outside = tmp_path / "outside.parquet"
    duckdb.sql(f"COPY (SELECT 42 AS answer) TO '{outside}'")
    con = connect_lake(lake)
    for query in (
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM read_csv('/etc/passwd')",
        f"SELECT * FROM read_parquet('{outside}')",
        f"SELECT * FROM '{outside}'",
        "SELECT * FROM glob('/etc/*')",
    ):
        with pytest.raises(ConfigError, match="SQL error: Permission Error"):
            run_sql(con, query)


def test_the_library_connection_itself_is_locked(lake: Lake, tmp_path: Path) -> None:
    """Not only `run_sql`: any statement on a lake connection meets the same walls."""
    before = _lake_bytes(lake)
    con = connect_lake(lake)
    with pytest.raises(duckdb.Error, match="configuration has been locked"):
        con.sql("SET enable_external_access = true")
    with pytest.raises(duckdb.PermissionException):
        con.sql(f"COPY (SELECT * FROM scores) TO '{lake.files('scores')[0]}' (FORMAT parquet)")
    with pytest.raises(duckdb.PermissionException):
        con.sql(f"COPY (SELECT 1) TO '{tmp_path / 'x.parquet'}'")
    assert _lake_bytes(lake) == before and not (tmp_path / "x.parquet").exists()


def test_every_lake_view_and_every_query_form_still_works(lake: Lake) -> None:
    before = _lake_bytes(lake)
    con = connect_lake(lake)
    names = [
        r[0]
        for r in con.sql(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal UNION ALL SELECT table_name FROM duckdb_tables()"
        ).fetchall()
    ]
    assert {
        "runs",
        "cases",
        "chunks",
        "scores",
        "scores_latest",
        "labels",
        "coverage",
        "run_metrics",
        "case_slices",
        "metrics",
        "judge_calls",
    } <= set(names)
    for name in names:
        assert run_sql(con, f"SELECT count(*) AS n FROM {name}").num_rows == 1
    assert run_sql(con, "SELECT count(DISTINCT run_id) AS n FROM scores").column("n").to_pylist() == [2]
    with_query = run_sql(con, "WITH s AS (SELECT * FROM scores_latest) SELECT count(*) AS n FROM s")
    assert with_query.column("n")[0].as_py() > 0
    assert "metric" in run_sql(con, "DESCRIBE scores").column("column_name").to_pylist()
    assert "scores" in run_sql(con, "SHOW TABLES").column("name").to_pylist()
    assert run_sql(con, "EXPLAIN SELECT * FROM cases").num_rows >= 1
    assert run_sql(con, "SELECT 1 AS a; SELECT 2 AS b").column_names == ["b"]
    assert run_sql(con, "SUMMARIZE SELECT value FROM scores").num_rows == 1
    assert _lake_bytes(lake) == before


def test_sql_command_refuses_a_copy_with_exit_2(tmp_path: Path) -> None:
    lake_dir = str(tmp_path / "lake")
    land(lake_dir, GOLDEN, TARGET, "r-one")
    before = _lake_bytes(Lake(lake_dir))
    target = Lake(lake_dir).files("runs")[0]
    command = [sys.executable, "-m", "raglake", "sql", f"COPY (SELECT 1) TO '{target}'", "--lake", lake_dir]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error:" in done.stdout and "read-only to queries" in done.stdout and "Traceback" not in done.stderr
    assert _lake_bytes(Lake(lake_dir)) == before
