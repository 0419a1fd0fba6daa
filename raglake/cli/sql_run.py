"""`raglake sql`'s query, stoppable and streamed.

DuckDB does not look at Python's signals while it works, so a query run in the main thread ignored
Ctrl-C. The query runs in a worker thread while the main thread waits, where SIGINT and the --timeout
reach it: either calls DuckDB's `con.interrupt()`, which ends the running query at its next chunk, and
the command ends with one line ("query interrupted by SIGINT", exit 130; "query timed out after N s",
exit 2). A second Ctrl-C leaves at once.

Rows are never held whole: --json writes each batch of rows as DuckDB makes it; the table fetches the
rows it prints and one more, to know whether there are more (a LIMIT around the query, so that DuckDB
stops there, or keeps only the top of a sort)."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import duckdb
import pyarrow as pa
import typer

from raglake.cli import render
from raglake.errors import RaglakeError
from raglake.lake.user_sql import stream_sql

T = TypeVar("T")
TABLE_ROWS = 1000  # rows the table shows
GRACE_S = 5.0  # after interrupt(): how long the worker may take to stop before the command leaves anyway


class QueryStopped(RaglakeError):
    """The query was stopped: by a signal (`signal` set) or by the time-out."""

    def __init__(self, message: str, signal_number: int | None = None):
        super().__init__(message)
        self.signal = signal_number


def _stop_reason(timeout: float) -> Callable[[], tuple[str, int | None] | None]:
    """Installs the SIGINT handler (main thread only); the returned function says why to stop, if at all."""
    started, stop = time.monotonic(), []

    def on_signal(signum: int, frame: Any) -> None:
        if stop and stop[0][1] is not None:  # a second Ctrl-C while the query stops: leave now
            os._exit(128 + signum)
        stop[:] = [(f"query interrupted by {signal.Signals(signum).name}", signum)]

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, on_signal)

    def reason() -> tuple[str, int | None] | None:
        if not stop and timeout and time.monotonic() - started >= timeout:
            stop.append((f"query timed out after {timeout:g} s (--timeout)", None))
        return stop[0] if stop else None

    return reason


def run_stoppable(con: duckdb.DuckDBPyConnection, work: Callable[[], T], timeout: float) -> T:
    """`work()` (which runs queries on `con`) in a worker thread, the main thread waiting: SIGINT or
    `timeout` seconds (0: none) interrupt the query, and QueryStopped says which."""
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = work()
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread and raised there
            outcome["error"] = e
        finally:
            done.set()

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if in_main else None
    try:
        reason = _stop_reason(timeout)
        threading.Thread(target=target, name="raglake-sql", daemon=True).start()
        stopping_since = math.inf
        while not done.wait(0.1):
            if stop := reason():
                con.interrupt()  # again each time: one sent between two statements is not kept
                stopping_since = min(stopping_since, time.monotonic())
                if time.monotonic() - stopping_since > GRACE_S:
                    break  # the worker is stuck outside DuckDB (a full pipe): leave it behind
    finally:
        if in_main:
            signal.signal(signal.SIGINT, previous)
    stop = reason()
    if stop and (not done.is_set() or "error" in outcome):
        raise QueryStopped(*stop)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _write_json(batches: Iterator[pa.RecordBatch]) -> None:
    out = sys.stdout
    try:
        for batch in batches:
            out.write("".join(json.dumps(row, default=str) + "\n" for row in batch.to_pylist()))
        out.flush()
    except BrokenPipeError:  # the reader went (`| head`): stop quietly, and let the exit's flush go nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())


def _head(con: duckdb.DuckDBPyConnection, query: str) -> pa.Table:
    schema, batches = stream_sql(con, query, limit=TABLE_ROWS + 1)
    return pa.Table.from_batches(list(batches), schema)


def run(con: duckdb.DuckDBPyConnection, query: str, *, as_json: bool, timeout: float) -> None:
    """Run `query` and print its rows: JSON lines, or a table of the first TABLE_ROWS."""
    try:
        if as_json:
            run_stoppable(con, lambda: _write_json(stream_sql(con, query)[1]), timeout)
            return
        table = run_stoppable(con, lambda: _head(con, query), timeout)
    except QueryStopped as e:
        if e.signal is None:
            raise
        render.console.print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(128 + e.signal) from None
    render.console.print(render.arrow_table(table.slice(0, TABLE_ROWS), max_rows=TABLE_ROWS))
    if table.num_rows > TABLE_ROWS:
        render.console.print(
            f"the first {TABLE_ROWS:,} rows shown; there are more (add a LIMIT or OFFSET, or --json for every row)",
            highlight=False,
        )
