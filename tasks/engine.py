"""How the flows' tasks run: as Prefect task runs inside a flow run, or in this process as plain calls of
the same task functions (the in-process engine, `orchestration: in-process`; issue 29).

A task is declared here (`@engine.task(name=..., retries=..., retry_delay_seconds=...)`), not with
Prefect's decorator, so that importing the tasks and the flows' bodies does not import Prefect (~1.1 s of a
cold start, and ~0.2 s of its exit): the in-process path never loads it. Inside a flow run the tasks run as
Prefect tasks built from the same declaration by raglake.tasks.on_prefect, which the Prefect flows import and
which installs itself here (`use_prefect`).

The flows call their tasks through this module (`call`, `map`, `submit`, `quote`, `run_logger`), so one flow
body serves both: the same tasks, the same content keys, the same lake rows. In process, a task's own
retries (`retries`, `retry_delay_seconds`: the IO edges) are kept, mapped and submitted calls run on a thread
pool of the flow's size that sees the caller's context variables, as Prefect's ThreadPoolTaskRunner does;
logs go to the logger `prefect.raglake` (Prefect's level, PREFECT_LOGGING_LEVEL, so --verbose shows them).
There is no flow run, so nothing reaches a Prefect API (no task runs, no artifacts)."""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

_POOL: contextvars.ContextVar[ThreadPoolExecutor | None] = contextvars.ContextVar("raglake_in_process", default=None)
IN_PROCESS_LOGGER = "prefect.raglake"


@dataclass(eq=False)
class Task:
    """A flow's task: its function and what Prefect's task would be given (every task is uncached: the
    content keys of raglake.pipeline.plan decide what is reused). `fn` is looked up at each run, in process
    and as a Prefect task run alike (a test may wrap it)."""

    fn: Callable[..., Any]
    name: str
    retries: int = 0
    retry_delay_seconds: float | Sequence[float] = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call(self, *args, **kwargs)

    def with_options(self, **changes: Any) -> Task:
        """A copy with other `name`, `retries` or `retry_delay_seconds` (Prefect's `Task.with_options`)."""
        return replace(self, **changes)


def task(*, name: str, retries: int = 0, retry_delay_seconds: float | Sequence[float] = 0) -> Callable:
    """Declare a flow's task (Prefect's `@task(name=, retries=, retry_delay_seconds=)`, uncached)."""

    def declare(fn: Callable[..., Any]) -> Task:
        return Task(fn, name, retries, retry_delay_seconds)

    return declare


class Orchestrator(Protocol):
    """What a flow run does with a task (raglake.tasks.on_prefect)."""

    def call(self, task: Task, args: tuple, kwargs: dict) -> Any: ...
    def map(self, task: Task, name: str, items: Sequence[Any], fixed: dict[str, Any]) -> list[Any]: ...
    def submit(self, task: Task, args: tuple, kwargs: dict) -> Any: ...
    def quote(self, value: Any) -> Any: ...
    def run_logger(self) -> logging.Logger | logging.LoggerAdapter: ...
    def map_on_dask(self, runner: Any, task: Task, name: str, items: Sequence[Any], fixed: dict) -> list: ...


_PREFECT: list[Orchestrator] = []  # raglake.tasks.on_prefect, once imported


def use_prefect(orchestrator: Orchestrator) -> None:
    """Run tasks outside the in-process engine as Prefect task runs (called by raglake.tasks.on_prefect)."""
    _PREFECT[:] = [orchestrator]


def _prefect() -> Orchestrator:
    if not _PREFECT:
        raise RuntimeError(
            "a raglake task ran outside a flow: inside raglake.tasks.engine.in_process, or in a Prefect flow "
            "(whose module imports raglake.tasks.on_prefect)"
        )
    return _PREFECT[0]


@contextmanager
def in_process(workers: int) -> Iterator[None]:
    """Run the flow body's tasks in this process (a pool of `workers` threads) until the block ends. A
    block that raises cancels what has not started (as Prefect's task runner does); what runs is waited for."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="raglake-task")
    token = _POOL.set(pool)
    try:
        with _console_logging():
            yield
    finally:
        _POOL.reset(token)
        pool.shutdown(wait=True, cancel_futures=True)


def running_in_process() -> bool:
    return _POOL.get() is not None


def call(task: Task, *args: Any, **kwargs: Any) -> Any:
    """`task(*args, **kwargs)`: a task run in the flow run, or in process the task's function, retried as
    the task says."""
    if _POOL.get() is None:
        return _prefect().call(task, args, kwargs)
    return _retried(task, args, kwargs)


def map(task: Task, name: str, items: Sequence[Any], **fixed: Any) -> list[Any]:  # noqa: A001 - Prefect's word
    """`task` over `items` as its parameter `name`, its other parameters `fixed`; the results in order."""
    if _POOL.get() is None:
        return _prefect().map(task, name, items, fixed)
    return [f.result() for f in [submit(task, **{name: item}, **fixed) for item in items]]


def submit(task: Task, *args: Any, **kwargs: Any) -> Any:
    """`task.submit(...)`: a future whose .result() is the task's (in process: on the engine's pool)."""
    pool = _POOL.get()
    if pool is None:
        return _prefect().submit(task, args, kwargs)
    context = contextvars.copy_context()
    future: Future = pool.submit(context.run, _retried, task, args, kwargs)
    return future


def map_on_dask(runner: Any, task: Task, name: str, items: Sequence[Any], **fixed: Any) -> list[Any]:
    """`task` over `items` on Dask (raglake.pipeline.runners.RunnerSpec `runner`): Prefect's task runner
    for Dask, so only inside a flow run (in process with Dask is refused when the run is planned)."""
    if _POOL.get() is not None:
        raise RuntimeError("the in-process engine runs no Dask tasks (orchestration: in-process refuses --runner dask)")
    return _prefect().map_on_dask(runner, task, name, items, fixed)


def quote(value: Any) -> Any:
    """A parameter Prefect must pass as it is, not walk for futures (its `quote`); in process, the value."""
    return value if _POOL.get() is not None else _prefect().quote(value)


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow run's logger (in process: `prefect.raglake`, at Prefect's level)."""
    return logging.getLogger(IN_PROCESS_LOGGER) if _POOL.get() is not None else _prefect().run_logger()


@contextmanager
def _console_logging() -> Iterator[None]:
    """In process, the logs at Prefect's level (PREFECT_LOGGING_LEVEL, which --verbose sets) on stderr, as
    Prefect's console handler shows a flow run's; when Prefect's logging is set up here, its handler does it."""
    logger = logging.getLogger(IN_PROCESS_LOGGER)
    if logging.getLogger("prefect").handlers or logger.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    layout = "%(asctime)s.%(msecs)03d | %(levelname)-7s | %(name)s - %(message)s"  # Prefect's console's
    handler.setFormatter(logging.Formatter(layout, "%H:%M:%S"))
    level = os.environ.get("PREFECT_LOGGING_LEVEL", "WARNING").upper()
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(level if level in logging.getLevelNamesMapping() else logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _retried(task: Task, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The task's function, retried as Prefect would: `task.retries` more tries after an exception, waiting
    `task.retry_delay_seconds` (one number, or one per retry)."""
    for attempt in range(task.retries + 1):
        try:
            return task.fn(*args, **kwargs)
        except Exception:
            if attempt == task.retries:
                raise
            time.sleep(_delay(task.retry_delay_seconds, attempt))
    raise AssertionError("unreachable")  # the loop returns or raises


def _delay(delays: Any, attempt: int) -> float:
    if isinstance(delays, (list, tuple)):
        return float(delays[min(attempt, len(delays) - 1)]) if delays else 0.0
    return float(delays or 0)
