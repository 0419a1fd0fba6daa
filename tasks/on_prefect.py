"""raglake's tasks as Prefect task runs, inside a flow run (raglake.tasks.engine's other half): each task
declared with `engine.task` becomes, once, Prefect's `task(name=, retries=, retry_delay_seconds=,
cache_policy=NO_CACHE)` of the same function. The Prefect flows import this module; importing it installs
it in the engine. The Dask runner's mapping lives here too: it is Prefect's (prefect-dask)."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from prefect import Task as PrefectTask
from prefect import get_client, get_run_logger, unmapped
from prefect import task as prefect_task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from raglake.pipeline.runners import RunnerSpec
from raglake.tasks import engine


class PrefectTasks:
    """engine.Orchestrator on Prefect: a task run per call, Prefect's futures for map and submit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._built: dict[engine.Task, PrefectTask] = {}

    def task(self, task: engine.Task) -> PrefectTask:
        """Prefect's task for a declared one (built once)."""
        with self._lock:
            if task not in self._built:
                self._built[task] = prefect_task(
                    name=task.name,
                    cache_policy=NO_CACHE,
                    retries=task.retries,
                    retry_delay_seconds=task.retry_delay_seconds,
                )(_calling(task))
            return self._built[task]

    def call(self, task: engine.Task, args: tuple, kwargs: dict) -> Any:
        return self.task(task)(*args, **kwargs)

    def map(self, task: engine.Task, name: str, items: Sequence[Any], fixed: dict[str, Any]) -> list[Any]:
        futures = self.task(task).map(**{name: items}, **{k: unmapped(v) for k, v in fixed.items()})
        return list(futures.result())

    def submit(self, task: engine.Task, args: tuple, kwargs: dict) -> Any:
        return self.task(task).submit(*args, **kwargs)

    def quote(self, value: Any) -> Any:
        return quote(value)

    def run_logger(self) -> logging.Logger | logging.LoggerAdapter:
        return get_run_logger()

    def map_on_dask(self, runner: RunnerSpec, task: engine.Task, name: str, items: Sequence[Any], fixed: dict) -> list:
        return dask_map(runner, task, {name: list(items), **{k: unmapped(v) for k, v in fixed.items()}})


def _calling(task: engine.Task) -> Callable[..., Any]:
    """The function a Prefect task runs: the declaration's `fn` as it is at the run (its signature and name
    for Prefect's parameters and task key)."""

    @functools.wraps(task.fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        return task.fn(*args, **kwargs)

    return run


PREFECT_TASKS = PrefectTasks()
engine.use_prefect(PREFECT_TASKS)


def dask_map(runner: RunnerSpec, task: engine.Task, parameters: dict[str, Any]) -> list[Any]:
    """`task` mapped over `parameters` (a list for the mapped one, the others `unmapped`: prefect-dask
    resolves no quote()) on Dask (prefect-dask): a LocalCluster of `runner.workers` processes, or the
    scheduler at `runner.address`."""
    from prefect_dask import DaskTaskRunner

    if runner.address:
        dask = DaskTaskRunner(address=runner.address)
    else:
        dask = DaskTaskRunner(
            cluster_kwargs={
                "n_workers": runner.workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
                "env": worker_env(),
            }
        )
    with dask:
        return [future.result() for future in dask.map(PREFECT_TASKS.task(task), parameters)]


def worker_env() -> dict[str, str]:
    """The environment of the Dask worker processes a flow starts: they report to this flow's Prefect
    API (the ephemeral server included) instead of each starting a server of its own. Handed to the
    cluster (each worker's Nanny sets it in its own process); this process's environment is left alone."""
    with get_client(sync_client=True) as client:
        return {"PREFECT_API_URL": str(client.api_url)}
