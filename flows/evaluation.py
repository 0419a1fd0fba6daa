"""The `evaluation` flow: an eval file (raglake.yaml) run as a deployment names it. It resolves the file (with
the deployment's overrides) through the same front door as `raglake run` and runs the `evaluate` flow for
each of its targets, as subflows; returns the run ids."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger

from raglake.config.front import resolve
from raglake.flows.evaluate import evaluate
from raglake.pipeline.plan import plan_run, planned


@flow(name="evaluation", flow_run_name="evaluation {config}")
def evaluation(config: str = "raglake.yaml", overrides: dict[str, Any] | None = None) -> list[str]:
    """Evaluate every target of the eval file `config` (a path relative to the worker's working folder),
    with `overrides` by setting name (`k`, `judge_model`, `judge.max_cost_usd`, …) winning over the file."""
    resolved = resolve(config, overrides or {}, discover=False)
    plans = [plan_run(s) for s in resolved.runs]  # every input checked before the first run
    logger = get_run_logger()
    logger.info("eval file %s: %d target(s)", config, len(plans))
    for note in resolved.notes:
        logger.warning("note: %s", note)
    with planned(*plans):
        return [evaluate(p.settings) for p in plans]
