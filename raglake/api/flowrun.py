"""The Python API's flows: each plan's `evaluate` flow body in this process (raglake.pipeline.orchestration),
or, when a run needs Prefect, Prefect's API first (raglake.flows.orchestrated; it adopts the temporary server
raglake.api.run launched) and the `evaluate` flow; with the local judge when asked for.
Imported by raglake.api.run only when it runs flows; Prefect only when a run needs it."""

from __future__ import annotations

from types import ModuleType

from rich.console import Console

from raglake import progress
from raglake.flows.evaluate_body import evaluate_in_process
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.orchestration import in_process_runs
from raglake.pipeline.plan import RunPlan, planned


def run_plans(plans: list[RunPlan], show_progress: bool) -> list[str]:
    """The `evaluate` flow of each plan, on Prefect's API (a clear error when it cannot start) or in this
    process (raglake.pipeline.orchestration); returns the run ids."""
    local = in_process_runs(plans)
    orchestrated = None if all(local) else prefect_side()
    if orchestrated is not None:
        orchestrated.start_api()
    with local_judge(plans[0].settings.judge) as judge, progress.reporting(Console(stderr=True), show_progress):
        ready = [p.with_judge(judge) if p.settings.judge is not None else p for p in plans]
        with planned(*ready):
            flows = [evaluate_in_process if here else orchestrated.evaluate for here in local]
            return [flow(p.settings) for flow, p in zip(flows, ready, strict=True)]


def prefect_side() -> ModuleType:
    """raglake.flows.orchestrated: Prefect, its API and the flows (imported while the early server starts)."""
    from raglake.flows import orchestrated  # here: a run in this process never imports Prefect

    return orchestrated
