"""Running the Prefect flows from the command line: Prefect's API first (a clear error when it cannot
start), each flow in a worker thread so that SIGINT/SIGTERM end the run promptly and stop every
helper it started (raglake.cli.interrupt). Imported only by the commands that run flows: the
commands that read the lake never load Prefect."""

from __future__ import annotations

from collections.abc import Callable

from raglake import progress
from raglake.cli import interrupt, render
from raglake.columnar.arrays import import_pandas_early
from raglake.flows import runtime
from raglake.flows.evaluate import evaluate, evaluate_in_process
from raglake.flows.metaeval import metaeval
from raglake.flows.rescore import rescore
from raglake.lake.landing import is_committed
from raglake.lake.store import Lake
from raglake.metaeval.plan import MetaevalSettings
from raglake.pipeline.embedding import load_embedder_early
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.orchestration import in_process_runs
from raglake.pipeline.plan import RunPlan, planned
from raglake.pipeline.rescore_settings import RescoreSettings


def _run_note(lake: str | None, run_ids: list[str]) -> Callable[[], str]:
    """What an interrupted `raglake run` says about each of its runs."""

    def note() -> str:
        the_lake, lines = Lake(lake), []
        for run_id in run_ids:
            if is_committed(the_lake, run_id):
                lines.append(f"run {run_id} had landed whole before the interruption")
            else:
                lines.append(
                    f"run {run_id} was not committed: nothing of it is visible in the lake; the same "
                    f"command with --run-id {run_id} finishes it (what it had finished is reused)"
                )
        return "\n".join(lines)

    return note


def evaluate_plans(plans: list[RunPlan], *, quiet: bool) -> list[str]:
    """Run the `evaluate` flow for each planned run (its inputs checked, its run id fixed); returns the run
    ids. Each flow takes its plan from this context (raglake.pipeline.plan.planned): nothing is loaded twice."""
    run_ids = [p.run_id for p in plans]
    with interrupt.stoppable(_run_note(plans[0].settings.lake, run_ids)), interrupt.cleanup(runtime.stop_api):
        for p in plans:  # the embedder loads while Prefect's server starts, not inside the embedding stage
            load_embedder_early(p.metrics, p.embedder, p.device)
        import_pandas_early()  # likewise pyarrow's import of pandas, not inside the first stage
        local = in_process_runs(plans)
        if not all(local):
            runtime.start_api()
        announce = render.console.print
        with local_judge(plans[0].settings.judge, announce, interrupt.cleanup) as judge:
            ready = [p.with_judge(judge) if p.settings.judge is not None else p for p in plans]
            with planned(*ready), progress.reporting(render.console, not quiet):
                flows = [evaluate_in_process if here else evaluate for here in local]
                return [interrupt.run_in_worker(flow, p.settings) for flow, p in zip(flows, ready, strict=True)]


def _rescore_note() -> str:
    return (
        "re-scoring stopped: scores that had landed are in the lake (scores_latest shows them), the rest is not; "
        "the same command finishes it (unchanged work is reused)"
    )


def rescore_runs(settings: RescoreSettings, *, quiet: bool) -> dict:
    """Run the `rescore` flow; returns its report."""
    with interrupt.stoppable(_rescore_note), interrupt.cleanup(runtime.stop_api):
        import_pandas_early()
        runtime.start_api()
        with local_judge(settings.judge, render.console.print, interrupt.cleanup) as judge:
            with progress.reporting(render.console, not quiet):
                return interrupt.run_in_worker(rescore, settings.model_copy(update={"judge": judge}))


def run_metaeval(settings: MetaevalSettings, *, quiet: bool) -> str:
    """Run the `metaeval` flow (starting the local judge when asked for); returns the meta-evaluation's id."""
    note = "meta-evaluation stopped: nothing of it was landed; the same command runs it again (encodings are cached)"
    with interrupt.stoppable(lambda: note), interrupt.cleanup(runtime.stop_api):
        runtime.start_api()
        with local_judge(settings.judge, render.console.print, interrupt.cleanup) as judge:
            with progress.reporting(render.console, not quiet):
                return interrupt.run_in_worker(metaeval, settings.model_copy(update={"judge": judge}))
