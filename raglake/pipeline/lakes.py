"""Opening the lake for questions, with the metric registry's table handed to it (the lake never
imports the metrics): the one way the CLI, the report, the gate, the flows and the pipeline open it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from raglake.analysis import LakeQueries
from raglake.lake.duck import AFTER_RUN_MEMORY
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.metrics.registry import all_metrics

T = TypeVar("T")


def registry_table() -> pa.Table:
    """The registry as a table, one row per metric (the lake's `metric_registry` view)."""
    return pa.Table.from_pylist([m.as_row() for m in all_metrics()])


def _lake(lake: Lake | str | Path | None) -> Lake:
    return lake if isinstance(lake, Lake) else Lake(lake)


def open_lake(lake: Lake | str | Path | None = None, *, memory_limit: str | None = None) -> LakeQueries:
    """The project's questions over a lake (a Lake, a URL or folder; None: $RAGLAKE_LAKE or data/lake);
    `memory_limit`: DuckDB's cap for the connection (after_run's AFTER_RUN_MEMORY)."""
    return LakeQueries(_lake(lake), registry_table(), memory_limit=memory_limit)


def after_run(lake: Lake | str | Path, work: Callable[[LakeQueries], T]) -> T:
    """`work`'s questions over the lake once runs have landed, in the process that holds what they left (the CLI's
    summaries, the flow's artifacts): on a connection capped at AFTER_RUN_MEMORY, so that DuckDB spills rather
    than grow the process past its plateau (issue 29: the 1M run's peak); should DuckDB fail to finish a query
    within the cap, `work` runs again on an uncapped connection (so it must change nothing until it returns)."""
    try:
        with open_lake(lake, memory_limit=AFTER_RUN_MEMORY) as q:
            return work(q)
    except duckdb.OutOfMemoryException:
        with open_lake(lake) as q:
            return work(q)


def connect_lake(lake: Lake | str | Path | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB over the lake's views, the `metric_registry` view included (for ad-hoc SQL)."""
    return connect(_lake(lake), registry_table())
