"""The lake's `judge_calls` table as the judge ledger's store (raglake.judge.ledger.CallStore):
stored calls read by key, new ones appended in atomic files partitioned by day; and what the table says
about the judges themselves (a model swapped behind a judge name: sql/judge_drift.sql)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import duckdb

from raglake.lake.duck import new_connection
from raglake.lake.query import run_query
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow

_SPEC = TABLES["judge_calls"]


class LakeCallStore:
    """Judge calls in a lake (every call, whether or not its run was committed: each was paid for)."""

    def __init__(self, lake: Lake):
        self.lake = lake

    def read(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None]]:
        """(call_key, status, response) of the stored calls with one of `statuses`, oldest first."""
        files = self.lake.files("judge_calls")
        if not files:
            return []
        with new_connection(self.lake) as con:
            con.read_parquet(files, hive_partitioning=True, union_by_name=True).create_view("judge_calls")
            return con.sql(
                "SELECT call_key, status, response FROM judge_calls WHERE list_contains($ok, status) "
                "ORDER BY created_at",
                params={"ok": list(statuses)},
            ).fetchall()

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """One atomic file of rows (judge_calls columns; a column a row does not give is null), in the
        partition of the first row's day."""
        if not rows:
            return
        columns = {name: [r.get(name) for r in rows] for name in _SPEC.schema.names}
        day = rows[0]["created_at"].date().isoformat()
        self.lake.write("judge_calls", day, to_arrow(_SPEC, columns), f"calls-{uuid.uuid4().hex}")


def judge_drift(con: duckdb.DuckDBPyConnection, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Where the model behind a judge name changed across `run_ids` (in order) or within one of them
    (sql/judge_drift.sql)."""
    return run_query(con, "judge_drift", run_ids=list(run_ids)).to_pylist()


def drift_note(row: dict[str, Any]) -> str:
    """One judge_drift row as a sentence for the CLI and the report."""

    def served(models: list[str], fingerprints: list[str]) -> str:
        shown = ", ".join(models) or "–"
        return shown + (f" (system_fingerprint {', '.join(fingerprints)})" if fingerprints else "")

    before = served(row["models_before"], row["fingerprints_before"])
    after = served(row["models_after"], row["fingerprints_after"])
    if row["scope"] == "within run":
        return (
            f"judge {row['judge']!r} changed within run {row['run_after']} ({row['change']}): "
            f"its replies came from {after}"
        )
    return (
        f"judge {row['judge']!r} changed between runs {row['run_before']} and {row['run_after']} "
        f"({row['change']}): {before} → {after}; its scores may not be comparable"
    )
