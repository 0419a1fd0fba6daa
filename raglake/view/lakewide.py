"""What the Metrics, Meta-evaluation and SQL pages show. The registry is sql/registry.sql, the agreement with
people sql/metaeval.sql and sql/metaevals.sql; the SQL page runs a user's query as `raglake sql` does
(raglake.lake.user_sql: only queries, over the read-only lake connection; the command line's row limit and
its stoppable runner, handed in by raglake.cli.view)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import duckdb
import pyarrow as pa

from raglake.analysis import LakeQueries
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.lake.user_sql import stream_sql
from raglake.view.case import NotFound

T = TypeVar("T")
MAX_QUERY_CHARS = 100_000
CSV_ROWS = 1_000_000  # rows of a CSV download (`raglake sql --json` gives every row)
Runner = Callable[[duckdb.DuckDBPyConnection, Callable[[], Any], float], Any]


def agreement(q: LakeQueries) -> dict[str, list[dict[str, Any]]]:
    """metric -> the latest meta-evaluation's figures of it (every split but dev, as the report shows them)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in run_query(q.con, "metaeval", metaeval_id="").to_pylist():
        if r["split"] != "dev":
            out[r["metric"]].append(r)
    return out


def metrics_page(q: LakeQueries) -> dict[str, Any]:
    figures = agreement(q)
    latest = next((r["metaeval_id"] for rows in figures.values() for r in rows), None)
    return {"registry": run_query(q.con, "registry").to_pylist(), "agreement": figures, "metaeval_id": latest}


def metaeval_page(q: LakeQueries, metaeval_id: str | None) -> dict[str, Any]:
    """Every meta-evaluation, and the figures of one (default the latest)."""
    listed = run_query(q.con, "metaevals").to_pylist()
    known = [r["metaeval_id"] for r in listed]
    if metaeval_id is not None and metaeval_id not in known:
        raise NotFound(f"the lake holds no meta-evaluation {metaeval_id!r}")
    chosen = metaeval_id or (known[0] if known else None)
    rows = run_query(q.con, "metaeval", metaeval_id=chosen).to_pylist() if chosen else []
    return {"metaevals": listed, "chosen": chosen, "rows": rows}


@dataclass(frozen=True)
class SqlLimits:
    """How the SQL page runs a query: `run(con, work, timeout)` (raglake.cli.sql_run.run_stoppable: the
    query is interrupted after `timeout` seconds), the rows a table shows (the command line's TABLE_ROWS)."""

    run: Runner
    table_rows: int
    timeout: float


def _checked(text: str) -> str:
    if len(text) > MAX_QUERY_CHARS:
        raise ConfigError(f"the query is {len(text):,} characters long; at most {MAX_QUERY_CHARS:,} are run")
    return text


def cell(value: Any) -> str:
    """A value of a user's query as text: NULL, floats to 6 significant digits, nested values as JSON."""
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def sql_table(q: LakeQueries, text: str, limits: SqlLimits) -> dict[str, Any]:
    """The first `limits.table_rows` rows of a read-only query, and whether there are more."""

    def head() -> pa.Table:
        schema, batches = stream_sql(q.con, _checked(text), limit=limits.table_rows + 1)
        return pa.Table.from_batches(list(batches), schema)

    table = limits.run(q.con, head, limits.timeout)
    return {
        "columns": table.column_names,
        "rows": [[cell(v) for v in row] for row in _rows(table.slice(0, limits.table_rows))],
        "more": table.num_rows > limits.table_rows,
        "limit": limits.table_rows,
    }


def _rows(table: pa.Table | pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """The rows as tuples, in column order (two columns may share a name: `SELECT 1 AS a, 2 AS a`)."""
    return zip(*(column.to_pylist() for column in table.columns)) if table.num_columns else iter(())


def _csv_lines(schema: pa.Schema, batches: Iterator[pa.RecordBatch], limit: int) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(schema.names)
    left = limit
    for batch in batches:
        for row in _rows(batch.slice(0, left)):
            writer.writerow(["" if v is None else cell(v) for v in row])
        left -= min(left, batch.num_rows)
        if not left:
            break
    return out.getvalue()


def sql_csv(q: LakeQueries, text: str, limits: SqlLimits) -> str:
    """The query's rows as CSV (at most CSV_ROWS), made within the same time-out as the page's table."""

    def rows() -> str:
        schema, batches = stream_sql(q.con, _checked(text), limit=CSV_ROWS)
        return _csv_lines(schema, batches, CSV_ROWS)

    return limits.run(q.con, rows, limits.timeout)
