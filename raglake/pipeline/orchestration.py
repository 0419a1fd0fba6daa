"""Which engine runs a planned run's tasks (RunSettings.orchestration): Prefect (a flow run on an API), or
this process (raglake.tasks.engine: the same tasks as plain calls). `auto` runs a small run on threads in
process when no Prefect API is configured: a temporary Prefect server costs ~3.5 s of CPU to start and
~0.5 s a flow (issue 29's cold start) and keeps nothing a user sees; a configured API, a large run (its flow
run kept in Prefect's local database) or a Dask runner (prefect-dask) keeps Prefect."""

from __future__ import annotations

from collections.abc import Sequence

from raglake import prefect_server
from raglake.pipeline.plan import RunPlan
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.settings import IN_PROCESS_MAX_CASES


def runs_in_process(plan: RunPlan) -> bool:
    """Whether the run's tasks run in this process (see the module docstring)."""
    chosen = plan.settings.orchestration
    if chosen != "auto":
        return chosen == "in-process"
    small = len(plan.golden.cases) <= IN_PROCESS_MAX_CASES
    return small and RunnerSpec.parse(plan.settings.runner).kind == "thread" and prefect_server.no_api_configured()


def in_process_runs(plans: Sequence[RunPlan]) -> list[bool]:
    """runs_in_process of each plan, decided once, before anything starts Prefect's API (starting it sets
    PREFECT_API_URL, after which `auto` would read an API as configured)."""
    return [runs_in_process(p) for p in plans]


def needs_prefect(plans: Sequence[RunPlan]) -> bool:
    """Whether any of the runs needs Prefect's API."""
    return not all(in_process_runs(plans))
