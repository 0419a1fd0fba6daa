"""DuckDB over the lake: base views of committed runs, the registry as a table, the views of
`sql/views/`, and the question files of `sql/` run with bound `$parameters`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from raglake.errors import ConfigError, UnknownNameError
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from raglake.metrics.registry import all_metrics

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
_PARAM = re.compile(r"(?<![\w$])\$([A-Za-z_]\w*)")
_COMMENT = re.compile(r"--[^\n]*")


def _registry_table() -> pa.Table:
    rows = [m.as_row() for m in all_metrics()]
    return pa.Table.from_pylist(rows)


def _partition_value(path: str) -> str:
    """`…/scores/run_id=r-1/s-2.parquet` -> `r-1`."""
    return path.replace("\\", "/").rsplit("/", 2)[-2].split("=", 1)[1]


def _read(con: duckdb.DuckDBPyConnection, files: list[str], name: str) -> duckdb.DuckDBPyRelation:
    if files:
        return con.read_parquet(files, hive_partitioning=True, union_by_name=True)
    return con.from_arrow(TABLES[name].full_schema.empty_table())


def connect(lake: Lake) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose views read the lake's committed runs.

    `runs` (the commit log, one small file per run) is read once into a table; every other table's
    view lists only the files of committed runs (a run's rows are visible only once its runs row,
    written last, exists), so no query pays for a scan of every runs file or a semi-join. The
    lake's files never change once written, so Parquet footers are cached for the connection."""
    con = duckdb.connect()
    if not lake.is_local:
        con.register_filesystem(lake.fs)
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_progress_bar = false")  # the CLI prints its own output
    _read(con, lake.files("runs"), "runs").create_view("_raw_runs")
    con.execute("CREATE TEMP TABLE runs AS SELECT * FROM _raw_runs")
    committed = {row[0] for row in fetch(con, "SELECT DISTINCT run_id FROM runs")}
    for name, spec in TABLES.items():
        if name == "runs":
            continue
        files = lake.files(name)
        if spec.partition == "run_id":
            files = [f for f in files if _partition_value(f) in committed]
        # judge_calls: paid for whether or not the run finished, so always visible
        _read(con, files, name).create_view(name)
    con.from_arrow(_registry_table()).create_view("metrics")
    for view in sorted((SQL_DIR / "views").glob("*.sql")):
        con.execute(view.read_text())
    return con


def query_names() -> list[str]:
    return sorted(p.stem for p in SQL_DIR.glob("*.sql"))


def sql_text(name: str) -> str:
    path = SQL_DIR / f"{name}.sql"
    if not path.exists():
        raise UnknownNameError("query", name, query_names())
    return path.read_text()


def run_query(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> pa.Table:
    """Run sql/<name>.sql with its `$parameters` bound from `params` (all must be given)."""
    text = sql_text(name)
    wanted = sorted(set(_PARAM.findall(_COMMENT.sub("", text))))
    missing = [p for p in wanted if p not in params]
    if missing:
        raise ConfigError(f"query {name!r} needs parameter(s) {', '.join('$' + m for m in missing)}")
    return con.sql(text, params={p: params[p] for p in wanted}).to_arrow_table()


def fetch(con: duckdb.DuckDBPyConnection, text: str, **params: Any) -> list[tuple]:
    """All rows of a small query (a relation runs to completion, leaving the connection free)."""
    return con.sql(text, params=params or None).fetchall()


def scalar(con: duckdb.DuckDBPyConnection, text: str, **params: Any) -> Any:
    rows = fetch(con, text, **params)
    return rows[0][0] if rows else None


def run_sql(con: duckdb.DuckDBPyConnection, text: str) -> pa.Table:
    """A user's own SELECT over the lake views."""
    try:
        return con.sql(text).to_arrow_table()
    except duckdb.Error as e:
        raise ConfigError(f"SQL error: {e}") from None
