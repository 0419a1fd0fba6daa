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


def connect(lake: Lake) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose views read the lake's committed runs."""
    con = duckdb.connect()
    if not lake.is_local:
        con.register_filesystem(lake.fs)
    for name, spec in TABLES.items():
        files = lake.files(name)
        if files:
            rel = con.read_parquet(files, hive_partitioning=True, union_by_name=True)
        else:
            rel = con.from_arrow(spec.full_schema.empty_table())
        rel.create_view(f"_raw_{name}")
    con.execute("CREATE VIEW runs AS SELECT * FROM _raw_runs")
    for name, spec in TABLES.items():
        if spec.partition == "run_id":  # a run's rows are visible only once its runs row (written last) exists
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM _raw_{name} WHERE run_id IN (SELECT run_id FROM runs)")
        elif name != "runs":  # judge_calls: paid for whether or not the run finished, so always visible
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM _raw_{name}")
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
