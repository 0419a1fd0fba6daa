"""Running the flows from the command line: Prefect's API first when a run needs it (a clear error when it
cannot start), each flow in a worker thread so that SIGINT/SIGTERM end the run promptly and stop every
helper it started (raglake.cli.interrupt). Imported only by the commands that run flows; Prefect itself
(raglake.flows.orchestrated) only when a run needs it: a run in this process and the commands that read the
lake never load it."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from raglake import prefect_server, progress
from raglake.cli import interrupt, render
from raglake.columnar.arrays import import_pandas_early
from raglake.flows.evaluate_body import evaluate_in_process
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
    local = in_process_runs(plans)
    for p in plans:  # the embedder loads while Prefect is imported and its server starts, or beside the run's start
        load_embedder_early(p.metrics, p.embedder, p.device, warm=not all(local))
    orchestrated = None if all(local) else prefect_side()
    stop = orchestrated.stop_api if orchestrated is not None else prefect_server.discard_early
    with interrupt.stoppable(_run_note(plans[0].settings.lake, run_ids)), interrupt.cleanup(stop):
        if orchestrated is not None:
            import_pandas_early()  # likewise pyarrow's import of pandas, not inside the first stage
            orchestrated.start_api()
        announce = render.console.print
        with local_judge(plans[0].settings.judge, announce, interrupt.cleanup) as judge:
            ready = [p.with_judge(judge) if p.settings.judge is not None else p for p in plans]
            with planned(*ready), progress.reporting(render.console, not quiet):
                flows = [evaluate_in_process if here else orchestrated.evaluate for here in local]
                return [interrupt.run_in_worker(flow, p.settings) for flow, p in zip(flows, ready, strict=True)]


def _rescore_note() -> str:
    return (
        "re-scoring stopped: scores that had landed are in the lake (scores_latest shows them), the rest is not; "
        "the same command finishes it (unchanged work is reused)"
    )


def rescore_runs(settings: RescoreSettings, *, quiet: bool) -> dict:
    """Run the `rescore` flow; returns its report."""
    orchestrated = prefect_side()
    with interrupt.stoppable(_rescore_note), interrupt.cleanup(orchestrated.stop_api):
        import_pandas_early()
        orchestrated.start_api()
        with local_judge(settings.judge, render.console.print, interrupt.cleanup) as judge:
            with progress.reporting(render.console, not quiet):
                return interrupt.run_in_worker(orchestrated.rescore, settings.model_copy(update={"judge": judge}))


def run_metaeval(settings: MetaevalSettings, *, quiet: bool) -> str:
    """Run the `metaeval` flow (starting the local judge when asked for); returns the meta-evaluation's id."""
    note = "meta-evaluation stopped: nothing of it was landed; the same command runs it again (encodings are cached)"
    orchestrated = prefect_side()
    with interrupt.stoppable(lambda: note), interrupt.cleanup(orchestrated.stop_api):
        orchestrated.start_api()
        with local_judge(settings.judge, render.console.print, interrupt.cleanup) as judge:
            with progress.reporting(render.console, not quiet):
                return interrupt.run_in_worker(orchestrated.metaeval, settings.model_copy(update={"judge": judge}))


def prefect_side() -> ModuleType:
    """raglake.flows.orchestrated: Prefect, its API and the flows, imported when a run needs them (while
    Prefect's temporary server, launched early, starts)."""
    from raglake.flows import orchestrated  # here: a run in this process never imports Prefect

    return orchestrated
