"""DuckDB over the lake: base views of committed runs, the metric registry's table (handed in by the
caller: the lake never imports the metrics), the views of `sql/views/`, and the question files of
`sql/` run with bound `$parameters`."""

from __future__ import annotations

import math
import re
from importlib import resources
from importlib.resources.abc import Traversable
from statistics import NormalDist
from typing import Any

import duckdb
import pyarrow as pa

from raglake.errors import ConfigError, LakeError, UnknownNameError
from raglake.lake.checks import report
from raglake.lake.duck import new_connection
from raglake.lake.layouts import current_columns, is_current
from raglake.lake.resample import GROUPS_TYPE, resample_means_udf
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from raglake.lake.user_sql import check_read_only, run_sql, stream_sql  # noqa: F401  (a user's own SQL, also from here)

SQL_DIR: Traversable = resources.files("raglake.sql")  # sql/ in a checkout, raglake/sql/ in an installed wheel
_PARAM = re.compile(r"(?<![\w$])\$([A-Za-z_]\w*)")
_COMMENT = re.compile(r"--[^\n]*")
_READS_REGISTRY = re.compile(r"\b(?:FROM|JOIN)\s+metric_registry\b", re.IGNORECASE)


def _sql_files(folder: str = "") -> dict[str, Traversable]:
    """name -> file of the *.sql files in SQL_DIR (or its subfolder), by name; none is a broken install."""
    where = SQL_DIR.joinpath(folder) if folder else SQL_DIR
    entries = where.iterdir() if where.is_dir() else ()
    found = {f.name.removesuffix(".sql"): f for f in entries if f.name.endswith(".sql")}
    if not found:
        raise LakeError(f"no SQL files in {where}: raglake is installed without its SQL (reinstall the package)")
    return dict(sorted(found.items()))


def _partition_value(path: str) -> str:
    """`…/scores/run_id=r-1/s-2.parquet` -> `r-1`."""
    return path.replace("\\", "/").rsplit("/", 2)[-2].split("=", 1)[1]


def _read(con: duckdb.DuckDBPyConnection, files: list[str], name: str) -> duckdb.DuckDBPyRelation:
    """A table's files as one relation of the current columns: files of an older layout read through
    raglake.lake.layouts (a column they lack as nulls, a renamed or retyped one under its current name)."""
    schema = TABLES[name].full_schema
    if not files:
        return con.from_arrow(schema.empty_table())
    rel = con.read_parquet(files, hive_partitioning=True, union_by_name=True)
    if is_current(name, rel.columns, schema.names):
        return rel  # a lake of the current layout: no projection in the way of the scan
    return rel.project(", ".join(current_columns(name, rel.columns, schema, lambda t: _sql_type(con, t))))


def _view_files(con: duckdb.DuckDBPyConnection, lake: Lake) -> dict[str, list[str]]:
    """Each table's files the views read, and the `runs` table: the sound files of committed runs. A
    damaged or foreign file is left out with one warning line naming it (raglake.lake.checks); when it is
    one of a run's own files the run is missing rows, so the whole run is left out (never shown with a
    part of its rows); a stray file is left out alone. Files of uncommitted runs are not even checked."""
    files: dict[str, list[str]] = {}
    files["runs"], damaged = lake.survey("runs")
    _read(con, files["runs"], "runs").create_view("_raw_runs")
    con.execute("CREATE TEMP TABLE runs AS SELECT * FROM _raw_runs")
    committed = {row[0] for row in fetch(con, "SELECT DISTINCT run_id FROM runs")}
    for name, spec in TABLES.items():
        if name != "runs":
            keep = (lambda f: _partition_value(f) in committed) if spec.partition == "run_id" else None
            files[name], found = lake.survey(name, keep)
            damaged += found
    left_out = report(damaged)
    for name, spec in TABLES.items():
        out = left_out.get(spec.partition)
        if out:
            files[name] = [f for f in files[name] if _partition_value(f) not in out]
    if left_out.get("run_id"):
        con.sql("DELETE FROM runs WHERE list_contains($out, run_id)", params={"out": sorted(left_out["run_id"])})
    return files


def _sql_type(con: duckdb.DuckDBPyConnection, arrow_type: pa.DataType) -> str:
    """DuckDB's name of an Arrow type (for a typed null)."""
    return str(con.from_arrow(pa.table({"x": pa.nulls(0, arrow_type)})).types[0])


def connect(
    lake: Lake, registry: pa.Table | None = None, *, memory_limit: str | None = None
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB whose views read the lake's committed runs, read-only, and whose
    `metric_registry` view is `registry` (one row per metric of the current code, built by the metrics
    layer; without it there is no `metric_registry` view, and the question files that join it cannot
    run: raglake.pipeline.lakes.open_lake hands it in). The lake's own `metrics` table (what each metric
    meant when a scoring landed) is a view like every other table.

    `runs` (the commit log, one small file per run) is read once into a table; every other table's
    view lists only the files of committed runs (a run's rows are visible only once its runs row,
    written last, exists), so no query pays for a scan of every runs file or a semi-join. The
    lake's files never change once written, so Parquet footers are cached for the connection.

    Once the views exist, file access is limited to the files they read and the configuration is
    locked: no query on the connection can write a file, read another one, attach a database or load
    an extension. It spills (past `memory_limit`, or DuckDB's default) into a folder of its own
    (raglake.lake.duck), removed when it closes."""
    con = new_connection(lake, memory_limit=memory_limit)
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_progress_bar = false")  # the CLI prints its own output
    files = _view_files(con, lake)
    readable = [f for table_files in files.values() for f in table_files]
    for name in TABLES:
        if name != "runs":  # judge_calls: paid for whether or not the run finished, so always visible
            _read(con, files[name], name).create_view(name)
    if registry is not None:
        registry_view(con, registry)
    con.create_function(
        "resample_means",
        resample_means_udf,
        [GROUPS_TYPE, "BIGINT", "BIGINT"],
        GROUPS_TYPE,
        type="arrow",
        side_effects=False,
    )
    con.create_function("normal_quantile", _normal_quantile, ["DOUBLE"], "DOUBLE", side_effects=False)
    con.create_function("normal_sf", _normal_sf, ["DOUBLE"], "DOUBLE", side_effects=False)
    for view in _sql_files("views").values():
        text = view.read_text(encoding="utf-8")
        if registry is not None or not _READS_REGISTRY.search(_COMMENT.sub("", text)):  # a view over `metrics`
            con.execute(text)  # needs the registry handed in
    _lock(con, readable)
    return con


# a metric the lake holds that the current code does not define (a user's metric of an eval file this process
# has not loaded, a metric since removed) is known by its latest landed definition (the `metrics` table)
_LANDED_DEFINITIONS = """
CREATE VIEW metric_registry AS
WITH landed AS (
    SELECT
        metric, family, version, scale, higher_is_better, level, seed, applies_to,
        array_to_string(inputs, ',') AS inputs, description, scale_view, origin, source,
        row_number() OVER (PARTITION BY metric ORDER BY scored_at DESC) AS newest
    FROM metrics
    WHERE metric NOT IN (SELECT metric FROM _registry_now)
),

final AS (
    SELECT *, true AS defined_here FROM _registry_now
    UNION ALL BY NAME
    SELECT * EXCLUDE (newest), false AS defined_here FROM landed WHERE newest = 1
)

SELECT * FROM final
"""


def registry_view(con: duckdb.DuckDBPyConnection, registry: pa.Table) -> None:
    """`metric_registry`: the current code's registry (`defined_here`), then each metric only the lake's landed
    definitions know, so that a user's metric reads with its direction and family in any process."""
    con.from_arrow(registry).create_view("_registry_now")
    con.execute(_LANDED_DEFINITIONS)


def _normal_sf(z: float) -> float:
    """SQL `normal_sf(z)`: the standard normal distribution's upper tail 1 - Φ(z), accurate far into
    it (erfc, no cancellation): compare_runs' p-values."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _normal_quantile(p: float) -> float:
    """SQL `normal_quantile(p)`: the standard normal distribution's p-quantile (1.959964 for 0.975)."""
    return NormalDist().inv_cdf(p)


def _lock(con: duckdb.DuckDBPyConnection, readable: list[str]) -> None:
    """Only `readable` may be opened from now on (DuckDB writes through a temp file beside its
    target, so even these cannot be overwritten), and no setting can be changed back."""
    con.sql("SET allowed_paths = $paths", params={"paths": readable})
    con.sql("SET enable_external_access = false")
    con.sql("SET lock_configuration = true")


def query_names() -> list[str]:
    return list(_sql_files())


def sql_text(name: str) -> str:
    queries = _sql_files()
    if name not in queries:
        raise UnknownNameError("query", name, queries)
    return queries[name].read_text(encoding="utf-8")


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
