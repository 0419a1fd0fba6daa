"""The judge ledger reaches its rows through a store (raglake.judge.ledger.CallStore): any object with
`read` and `append` serves, and the lake's judge_calls table is one (raglake.lake.calls.LakeCallStore)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raglake.judge.ledger import JudgeLedger
from raglake.lake.calls import LakeCallStore
from raglake.lake.store import Lake


class ListStore:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows, self.appended = rows, []

    def read(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None]]:
        return [(r["call_key"], r["status"], r["response"]) for r in self.rows if r["status"] in statuses]

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        self.appended.append(list(rows))


def test_the_ledger_reuses_answered_calls_of_its_store_and_appends_new_ones_in_batches() -> None:
    store = ListStore(
        [
            {"call_key": "k-ok", "status": "ok", "response": "{}"},
            {"call_key": "k-err", "status": "judge_error", "response": None},
        ]
    )
    ledger = JudgeLedger(store, run_id="r-1", flush_every=2)
    assert ledger.lookup("k-ok").response == "{}" and ledger.lookup("k-err") is None  # an error is asked again
    ledger.record({"call_key": "k-new", "status": "parse_error", "response": "nope"})
    assert store.appended == [] and ledger.lookup("k-new").status == "parse_error"
    ledger.record({"call_key": "k-new2", "status": "judge_error", "response": None})
    assert [[r["call_key"] for r in batch] for batch in store.appended] == [["k-new", "k-new2"]]
    assert {r["run_id"] for r in store.appended[0]} == {"r-1"}
    ledger.flush()  # nothing buffered: nothing appended
    assert len(store.appended) == 1


def test_the_lakes_judge_calls_table_is_a_store(tmp_path: Path) -> None:
    store = LakeCallStore(Lake(str(tmp_path / "lake")))
    assert store.read(["ok"]) == []
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    store.append(
        [
            {"call_key": "a", "status": "ok", "response": "{1}", "created_at": now},
            {"call_key": "b", "status": "judge_error", "response": None, "created_at": now},
        ]
    )
    store.append([{"call_key": "c", "status": "parse_error", "response": "x", "created_at": now + dt.timedelta(1)}])
    assert store.read(["ok", "parse_error"]) == [("a", "ok", "{1}"), ("c", "parse_error", "x")]
    assert JudgeLedger(store).lookup("c").status == "parse_error"
