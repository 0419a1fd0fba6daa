"""The lake behind `raglake view`: one read-only connection (raglake.pipeline.lakes.open_lake, the
CLI's), used by one request at a time, and opened anew when runs or meta-evaluations have landed since."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from raglake.analysis import LakeQueries, missing_lake
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake

WATCHED = ("runs", "metaeval")  # a new file in these tables is new content: the connection is opened again


class LakeState:
    """The lake's queries, shared by the app's requests. DuckDB runs one statement at a time on a
    connection, and the lake's `runs` table is a temporary table of this connection (a cursor does not see
    it), so the requests take turns through a lock."""

    def __init__(self, lake: str | None):
        self.lake = Lake(lake)
        self._lock = threading.Lock()
        self._queries: LakeQueries | None = None
        self._seen: tuple[str, ...] | None = None

    @property
    def url(self) -> str:
        return self.lake.url

    def check(self) -> None:
        """A LakeError when there is no lake at the address (before the server starts)."""
        if (missing := missing_lake(self.lake)) is not None:
            raise missing

    def _listing(self) -> tuple[str, ...]:
        return tuple(sorted(f for table in WATCHED for f in self.lake.listed(table)))

    @contextmanager
    def queries(self) -> Iterator[LakeQueries]:
        """The lake's queries, for this request alone; reopened first when a run has landed since."""
        with self._lock:
            listing = self._listing()
            if self._queries is None or listing != self._seen:
                if self._queries is not None:
                    self._queries.con.close()
                self._queries, self._seen = open_lake(self.lake), listing
            yield self._queries

    def close(self) -> None:
        with self._lock:
            if self._queries is not None:
                self._queries.con.close()
                self._queries = None
