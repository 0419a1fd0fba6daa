"""How the flows' tasks run: as Prefect task runs inside a flow run (the default), or in this process as
plain calls of the same task functions (the in-process engine, `orchestration: in-process`; issue 29).

The flows call their tasks through this module (`call`, `map`, `submit`, `run_logger`), never
`task(...)`/`task.map`/`get_run_logger` directly, so one flow body serves both: the same tasks, the
same content keys, the same lake rows. In process, a task's own retries (`retries`,
`retry_delay_seconds`: the IO edges) are kept, Prefect's annotations (`quote`, `unmapped`) are
unwrapped, mapped and submitted calls run on a thread pool of the flow's size that sees the caller's
context variables, as Prefect's ThreadPoolTaskRunner does; logs go to the logger `prefect.raglake`
(Prefect's level and console, so --verbose shows them as before; not `prefect.flow_runs`, whose API
handler wants a flow run). There is no flow run, so nothing reaches a Prefect API (no task runs, no
artifacts)."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from prefect import get_run_logger, unmapped
from prefect.utilities.annotations import BaseAnnotation

_POOL: contextvars.ContextVar[ThreadPoolExecutor | None] = contextvars.ContextVar("raglake_in_process", default=None)


@contextmanager
def in_process(workers: int) -> Iterator[None]:
    """Run the flow body's tasks in this process (a pool of `workers` threads) until the block ends. A
    block that raises cancels what has not started (as Prefect's task runner does); what runs is waited for."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="raglake-task")
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)
        pool.shutdown(wait=True, cancel_futures=True)


def running_in_process() -> bool:
    return _POOL.get() is not None


def call(task: Any, *args: Any, **kwargs: Any) -> Any:
    """`task(*args, **kwargs)`: a task run in the flow run, or in process the task's function, retried as
    the task says."""
    if _POOL.get() is None:
        return task(*args, **kwargs)
    return _retried(task, tuple(_plain(a) for a in args), {k: _plain(v) for k, v in kwargs.items()})


def map(task: Any, name: str, items: Sequence[Any], **fixed: Any) -> list[Any]:  # noqa: A001 - Prefect's word
    """`task` over `items` as its parameter `name`, its other parameters `fixed`; the results in order."""
    if _POOL.get() is None:
        return list(task.map(**{name: items}, **{k: unmapped(v) for k, v in fixed.items()}).result())
    return [f.result() for f in [submit(task, **{name: item}, **fixed) for item in items]]


def submit(task: Any, *args: Any, **kwargs: Any) -> Any:
    """`task.submit(...)`: a future whose .result() is the task's (in process: on the engine's pool)."""
    pool = _POOL.get()
    if pool is None:
        return task.submit(*args, **kwargs)
    context = contextvars.copy_context()
    future: Future = pool.submit(context.run, call, task, *args, **kwargs)
    return future


def run_logger() -> logging.Logger | logging.LoggerAdapter:
    """The flow run's logger (in process: `prefect.raglake`, under Prefect's level and console)."""
    return logging.getLogger("prefect.raglake") if _POOL.get() is not None else get_run_logger()


def _plain(value: Any) -> Any:
    """A value without Prefect's annotations (quote, unmapped), as a task run receives it."""
    while isinstance(value, BaseAnnotation):
        value = value.unwrap()
    return value


def _retried(task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The task's function, retried as Prefect would: `task.retries` more tries after an exception, waiting
    `task.retry_delay_seconds` (one number, or one per retry)."""
    fn: Callable[..., Any] = task.fn
    retries = task.retries or 0
    for attempt in range(retries + 1):
        try:
            return fn(*args, **kwargs)
        except Exception:
            if attempt == retries:
                raise
            time.sleep(_delay(task.retry_delay_seconds, attempt))
    raise AssertionError("unreachable")  # the loop returns or raises


def _delay(delays: Any, attempt: int) -> float:
    if isinstance(delays, (list, tuple)):
        return float(delays[min(attempt, len(delays) - 1)]) if delays else 0.0
    return float(delays or 0)
