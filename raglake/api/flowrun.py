"""The Python API's flows: Prefect's API first when a run needs it (raglake.flows.runtime; it adopts the
temporary server raglake.api.run launched), then the `evaluate` flow of each plan (or its body in this
process: raglake.pipeline.orchestration), with the local judge when asked for.
Imported by raglake.api.run only when it runs flows, so that importing the API does not import Prefect."""

from __future__ import annotations

from rich.console import Console

from raglake import progress
from raglake.flows import runtime
from raglake.flows.evaluate import evaluate, evaluate_in_process
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.orchestration import in_process_runs
from raglake.pipeline.plan import RunPlan, planned


def run_plans(plans: list[RunPlan], show_progress: bool) -> list[str]:
    """The `evaluate` flow of each plan, on Prefect's API (a clear error when it cannot start) or in this
    process (raglake.pipeline.orchestration); returns the run ids."""
    local = in_process_runs(plans)
    if not all(local):
        runtime.start_api()
    with local_judge(plans[0].settings.judge) as judge, progress.reporting(Console(stderr=True), show_progress):
        ready = [p.with_judge(judge) if p.settings.judge is not None else p for p in plans]
        with planned(*ready):
            flows = [evaluate_in_process if here else evaluate for here in local]
            return [flow(p.settings) for flow, p in zip(flows, ready, strict=True)]
