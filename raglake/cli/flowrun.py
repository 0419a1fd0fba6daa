"""Running the Prefect flows from the command line: Prefect's API first (a clear error when it cannot
start), each flow in a worker thread so that SIGINT/SIGTERM end the run promptly and stop every
helper it started (raglake.cli.interrupt). Imported only by the commands that run flows: the
commands that read the lake never load Prefect."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raglake import progress
from raglake.cli import interrupt, render
from raglake.cli.common import _judge_endpoint
from raglake.flows import runtime
from raglake.flows.evaluate import evaluate
from raglake.flows.rescore import rescore
from raglake.lake.landing import is_committed
from raglake.lake.store import Lake


def _run_note(lake: str | None, run_ids: list[str]) -> Callable[[], str]:
    """What an interrupted `raglake run` says about each of its runs."""
    def note() -> str:
        the_lake, lines = Lake(lake), []
        for run_id in run_ids:
            if is_committed(the_lake, run_id):
                lines.append(f"run {run_id} had landed whole before the interruption")
            else:
                lines.append(f"run {run_id} was not committed: nothing of it is visible in the lake; the same "
                             f"command with --run-id {run_id} finishes it (what it had finished is reused)")
        return "\n".join(lines)
    return note


def evaluate_targets(targets: list[str], run_ids: list[str], *, judge: str | None, remote: dict | None,
                     judge_settings: dict, quiet: bool, options: dict[str, Any]) -> list[str]:
    """Run the `evaluate` flow for each target under its planned run id; returns the run ids."""
    with interrupt.stoppable(_run_note(options.get("lake"), run_ids)), interrupt.cleanup(runtime.stop_api):
        runtime.start_api()
        with _judge_endpoint(judge, remote, judge_settings) as judge_config, \
                progress.reporting(render.console, not quiet):
            return [interrupt.run_in_worker(evaluate, target=spec, run_id=run_id, judge=judge_config, **options)
                    for spec, run_id in zip(targets, run_ids, strict=True)]


def _rescore_note() -> str:
    return ("re-scoring stopped: scores that had landed are in the lake (scores_latest shows them), the rest is not; "
            "the same command finishes it (unchanged work is reused)")


def rescore_runs(*, quiet: bool, **parameters: Any) -> dict:
    """Run the `rescore` flow; returns its report."""
    with interrupt.stoppable(_rescore_note), interrupt.cleanup(runtime.stop_api):
        runtime.start_api()
        with progress.reporting(render.console, not quiet):
            return interrupt.run_in_worker(rescore, **parameters)
