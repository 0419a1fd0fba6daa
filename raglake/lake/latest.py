"""`scores.is_latest`: true on the newest scoring's row of every run × case × metric (scored_at, then
scoring_id, as the scores_latest view ranks them), so a plain Parquet reader filters on it.

A scoring lands its rows with is_latest = true (they are the newest when written); `settle` then sets
false on the rows of a run that a newer scoring superseded, rewriting only the files whose flags are
wrong, each atomically (raglake.lake.store.Lake.rewrite: every row and value is kept, only the flag
changes). Settling is idempotent and derived from the rows alone, so a crash between a scoring's landing
and its settle is repaired by the next settle (rescore settles every run it touches before and after)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from raglake.lake.duck import new_connection
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES

_FLAGS = """
WITH rows AS (
    SELECT filename, file_row_number, case_id, metric, scoring_id, scored_at, {flag} AS is_latest
    FROM read_parquet($files, filename = true, file_row_number = true, union_by_name = true)
),
several AS (SELECT metric FROM rows GROUP BY metric HAVING count(DISTINCT scoring_id) > 1),
flags AS (
    SELECT filename, file_row_number, is_latest, true AS latest
    FROM rows ANTI JOIN several USING (metric)
    UNION ALL
    SELECT filename, file_row_number, is_latest,
        row_number() OVER (PARTITION BY case_id, metric ORDER BY scored_at DESC, scoring_id DESC) = 1 AS latest
    FROM rows SEMI JOIN several USING (metric)
),
wrong AS (SELECT filename FROM flags GROUP BY filename HAVING bool_or(is_latest IS DISTINCT FROM latest))
SELECT filename, list(latest ORDER BY file_row_number) AS latest
FROM flags SEMI JOIN wrong USING (filename)
GROUP BY filename
"""


def scores_files(lake: Lake, run_id: str) -> list[str]:
    """The run's committed-name scores files (temp files of interrupted writes left out)."""
    found = [f for f in lake.partition_files("scores", run_id) if f.endswith(".parquet")]
    found = [f for f in found if not f.replace("\\", "/").rsplit("/", 1)[-1].startswith(".")]
    return found if lake.is_local else [lake.fs.unstrip_protocol(f) for f in found]


def _with_flags(table: pa.Table, latest: list[bool]) -> pa.Table:
    """The file's rows in the current schema (columns it predates as nulls) with `is_latest` set."""
    schema = TABLES["scores"].schema
    columns = {
        f.name: table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    }
    columns["is_latest"] = pa.array(latest, pa.bool_())
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def settle(lake: Lake, run_id: str) -> list[str]:
    """Make `is_latest` right on every scores row of a committed run; the files rewritten come back."""
    files = scores_files(lake, run_id)
    if not files:
        return []
    with new_connection(lake) as con:
        names = con.sql("SELECT * FROM read_parquet($files, union_by_name = true)", params={"files": files}).columns
        flag = "is_latest" if "is_latest" in names else "NULL::BOOLEAN"  # files written before the column
        wrong = con.sql(_FLAGS.format(flag=flag), params={"files": files}).fetchall()
    rewritten = []
    for path, latest in wrong:
        with lake.fs.open(path, "rb") as f:
            table = pq.read_table(f)
        stem = path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".parquet")
        rewritten.append(lake.rewrite("scores", run_id, _with_flags(table, latest), stem))
    return rewritten
