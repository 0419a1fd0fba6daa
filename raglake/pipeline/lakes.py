"""Opening the lake for questions, with the metric registry's table handed to it (the lake never
imports the metrics): the one way the CLI, the report, the gate, the flows and the pipeline open it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from raglake.analysis import LakeQueries
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.metrics.registry import all_metrics


def registry_table() -> pa.Table:
    """The registry as a table, one row per metric (the lake's `metric_registry` view)."""
    return pa.Table.from_pylist([m.as_row() for m in all_metrics()])


def _lake(lake: Lake | str | Path | None) -> Lake:
    return lake if isinstance(lake, Lake) else Lake(lake)


def open_lake(lake: Lake | str | Path | None = None) -> LakeQueries:
    """The project's questions over a lake (a Lake, a URL or folder; None: $RAGLAKE_LAKE or data/lake)."""
    return LakeQueries(_lake(lake), registry_table())


def connect_lake(lake: Lake | str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB over the lake's views, the `metric_registry` view included (for ad-hoc SQL)."""
    return connect(_lake(lake), registry_table())
