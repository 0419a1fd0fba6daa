"""SIGINT and SIGTERM during a run: stop the helpers the run started and end the process at once.

The work (a Prefect flow) runs in a worker thread while the main thread waits, so the signal reaches
raglake's handler and not Prefect's engine (which only installs its own in the main thread, and on a
signal would report a crash and then wait for every task thread: a judge task retrying a server that
the same signal stopped kept a run alive for minutes). Threads cannot be stopped from outside, so the
handler runs the registered cleanups (the local judge server, Prefect's temporary API server), says
what became of the run and leaves with `os._exit(128 + signal)`.

That is safe for the lake by construction: every file lands under a temporary name and is renamed,
and a run is committed only by its `runs` row, written last, so a run ended at any point is either
whole or invisible, and a retry with the same `--run-id` replaces its uncommitted files."""

from __future__ import annotations

import contextlib
import contextvars
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_cleanups: list[Callable[[], None]] = []
_notes: list[Callable[[], str]] = []
_stopping = threading.Event()


@contextlib.contextmanager
def cleanup(fn: Callable[[], None]) -> Iterator[None]:
    """Run `fn` if the process is interrupted while the block runs (last registered, first run)."""
    _cleanups.append(fn)
    try:
        yield
    finally:
        _cleanups.remove(fn)


def _write(text: str) -> None:
    """Straight to the file descriptor: the interrupted main thread may hold sys.stdout's lock."""
    data = text.encode("utf-8", "replace")
    while data:
        data = data[os.write(1, data) :]


def _handle(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    if _stopping.is_set():  # a second signal while the cleanups run: leave now
        os._exit(128 + signum)
    _stopping.set()
    show_cursor = "\x1b[?25h" if os.isatty(1) else ""  # a progress display may have hidden it
    _write(f"{show_cursor}\nerror: interrupted by {name}: stopping the run\n")
    for fn in reversed(_cleanups):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - one helper that cannot be stopped must not keep the others running
            _write(f"warning: could not stop {getattr(fn, '__qualname__', fn)}: {e}\n")
    for note in _notes:
        said = note()
        if said:  # an outer block's note may have nothing to add
            _write(said + "\n")
    # what Python buffered for stdout/stderr before the signal still belongs in the output
    with contextlib.suppress(OSError, ValueError, RuntimeError):  # a closed or busy stream: nothing to save
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(128 + signum)


@contextlib.contextmanager
def stoppable(note: Callable[[], str]) -> Iterator[None]:
    """While the block runs, SIGINT/SIGTERM stop the process promptly (see the module docstring);
    `note()` says what became of the work. Only in the main thread (elsewhere it does nothing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _handle) for s in SIGNALS}
    _notes.append(note)
    try:
        yield
    finally:
        _notes.remove(note)
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_in_worker(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a worker thread, the main thread waiting (and free to take signals);
    its result or its exception comes back here. The worker sees the caller's context variables
    (Prefect keeps its settings and client contexts in them)."""
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - handed to the caller and raised there
            outcome["error"] = e

    worker = threading.Thread(target=context.run, args=(work,), name="raglake-run", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(timeout=0.2)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
