"""The judge-call ledger: every call lands in the lake's `judge_calls` table, keyed by a hash of
(model, prompt id, prompt version, parameters, rendered messages). A call whose key is already there
is never made again (its stored response is parsed anew), so re-scoring with unchanged prompts and
model makes zero calls, and a crashed run resumes without paying twice."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow

REUSABLE = ("ok", "parse_error")  # the judge answered: reuse; judge_error (no answer) is asked again


def call_key(model: str, prompt_id: str, prompt_version: int, params: dict[str, Any], messages: list[dict[str, str]]) -> str:
    blob = json.dumps([model, prompt_id, prompt_version, params, messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class LedgerHit:
    status: str
    response: str | None  # the raw text the judge answered


class JudgeLedger:
    def __init__(self, lake: Lake, run_id: str | None = None, flush_every: int = 25):
        self.lake, self.run_id, self.flush_every = lake, run_id, flush_every
        self._known: dict[str, LedgerHit] | None = None
        self._buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _load(self) -> dict[str, LedgerHit]:
        if self._known is None:
            from raglake.lake.query import connect

            con = connect(self.lake)
            rows = con.sql(
                "SELECT call_key, status, response FROM judge_calls WHERE list_contains($ok, status) "
                "ORDER BY created_at", params={"ok": list(REUSABLE)},
            ).fetchall()
            self._known = {key: LedgerHit(status, response) for key, status, response in rows}
        return self._known

    def preload(self) -> int:
        """Read the reusable calls of the lake now (once per run; otherwise the first lookup does it)."""
        with self._lock:
            return len(self._load())

    def lookup(self, key: str) -> LedgerHit | None:
        with self._lock:
            return self._load().get(key)

    def record(self, row: dict[str, Any]) -> None:
        """Keep one call's row; rows reach the lake in atomic files of `flush_every`."""
        row = {**row, "run_id": self.run_id, "created_at": dt.datetime.now(dt.timezone.utc)}
        with self._lock:
            if row["status"] in REUSABLE:
                self._load()[row["call_key"]] = LedgerHit(row["status"], row.get("response"))
            self._buffer.append(row)
            full = len(self._buffer) >= self.flush_every
        if full:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            rows, self._buffer = self._buffer, []
        if not rows:
            return
        spec = TABLES["judge_calls"]
        columns = {name: [r.get(name) for r in rows] for name in spec.schema.names}
        day = rows[0]["created_at"].date().isoformat()
        self.lake.write("judge_calls", day, to_arrow(spec, columns), f"calls-{uuid.uuid4().hex}")
