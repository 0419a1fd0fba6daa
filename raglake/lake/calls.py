"""The lake's `judge_calls` table as the judge ledger's store (raglake.judge.ledger.CallStore):
stored calls read by key, new ones appended in atomic files partitioned by day."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import duckdb

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
        con = duckdb.connect()
        if not self.lake.is_local:
            con.register_filesystem(self.lake.fs)
        con.read_parquet(files, hive_partitioning=True, union_by_name=True).create_view("judge_calls")
        return con.sql(
            "SELECT call_key, status, response FROM judge_calls WHERE list_contains($ok, status) ORDER BY created_at",
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
