"""The lake behind `raglake view`: one read-only connection (raglake.pipeline.lakes.open_lake, the
CLI's), used by one request at a time, and opened anew when runs, scorings or meta-evaluations have landed
since. A page's figures are kept until then: the lake's files never change once written, so the same page
of the same lake is the same page (the first request of a page pays for its queries, the next ones not)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from raglake.analysis import LakeQueries, missing_lake
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake

T = TypeVar("T")
# a new file in these tables is new content (a run, a re-scoring of one, a meta-evaluation): the connection is
# opened again and the kept pages forgotten
WATCHED = ("runs", "scores", "metaeval")
KEPT_PAGES = 64  # pages' figures kept, the least recently asked for forgotten first


class LakeState:
    """The lake's queries, shared by the app's requests. DuckDB runs one statement at a time on a
    connection, and the lake's `runs` table is a temporary table of this connection (a cursor does not see
    it), so the requests take turns through a lock."""

    def __init__(self, lake: str | None):
        self.lake = Lake(lake)
        self._lock = threading.Lock()
        self._queries: LakeQueries | None = None
        self._seen: tuple[str, ...] | None = None
        self._pages: OrderedDict[Hashable, Any] = OrderedDict()

    @property
    def url(self) -> str:
        return self.lake.url

    def check(self) -> None:
        """A LakeError when there is no lake at the address (before the server starts)."""
        if (missing := missing_lake(self.lake)) is not None:
            raise missing

    def _listing(self) -> tuple[str, ...]:
        return tuple(sorted(f for table in WATCHED for f in self.lake.listed(table)))

    def _current(self) -> LakeQueries:
        """The connection, opened again (and the kept pages forgotten) when the lake has new files. Lock held."""
        listing = self._listing()
        if self._queries is None or listing != self._seen:
            if self._queries is not None:
                self._queries.close()
            self._queries, self._seen = open_lake(self.lake), listing
            self._pages.clear()
        return self._queries

    @contextmanager
    def queries(self) -> Iterator[LakeQueries]:
        """The lake's queries, for this request alone; reopened first when a run has landed since."""
        with self._lock:
            yield self._current()

    def page(self, key: Hashable, build: Callable[[LakeQueries], T]) -> T:
        """A page's figures: those kept for `key` while the lake is unchanged, else `build(queries)`, kept."""
        with self._lock:
            q = self._current()
            if key in self._pages:
                self._pages.move_to_end(key)
                return self._pages[key]
            value = build(q)
            self._pages[key] = value
            while len(self._pages) > KEPT_PAGES:
                self._pages.popitem(last=False)
            return value

    def close(self) -> None:
        with self._lock:
            if self._queries is not None:
                self._queries.close()
                self._queries = None
