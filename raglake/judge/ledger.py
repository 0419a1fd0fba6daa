"""The judge-call ledger: every call lands in a store (the lake's `judge_calls` table, handed in by the
pipeline as a `CallStore`: raglake.lake.calls.LakeCallStore), keyed by a hash of
(model, prompt id, prompt version, parameters, rendered messages). A call whose key is already there
is never made again (its stored response is parsed anew), so re-scoring with unchanged prompts and
model makes zero calls, and a crashed run resumes without paying twice."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

REUSABLE = ("ok", "parse_error")  # the judge answered: reuse; judge_error (no answer) is asked again


def call_key(
    model: str, prompt_id: str, prompt_version: int, params: dict[str, Any], messages: list[dict[str, str]]
) -> str:
    blob = json.dumps([model, prompt_id, prompt_version, params, messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class LedgerHit:
    status: str
    response: str | None  # the raw text the judge answered


class CallStore(Protocol):
    """Where the ledger's rows live."""

    def read(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None]]:
        """(call_key, status, response) of the stored calls with one of `statuses`, oldest first."""
        ...

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Store rows (the judge_calls columns) at once."""
        ...


class JudgeLedger:
    def __init__(self, store: CallStore, run_id: str | None = None, flush_every: int = 25):
        self.store, self.run_id, self.flush_every = store, run_id, flush_every
        self._known: dict[str, LedgerHit] | None = None
        self._buffer: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def _load(self) -> dict[str, LedgerHit]:
        if self._known is None:
            self._known = {key: LedgerHit(status, response) for key, status, response in self.store.read(REUSABLE)}
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
        if rows:
            self.store.append(rows)
