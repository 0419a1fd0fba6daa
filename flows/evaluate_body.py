"""The `evaluate` flow's body: load golden set → capture in batches → embed every distinct text once →
judge (when a judge is configured) → score in batches → land. Prefect-free (its tasks run through
raglake.tasks.engine): the Prefect flow (raglake.flows.evaluate) runs it inside a flow run, and
`evaluate_in_process` runs it in this process without importing Prefect at all."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from raglake import progress
from raglake.flows.stages import ScoreWork, score_stage
from raglake.judge.stage import SpotSample
from raglake.lake.store import Lake
from raglake.pipeline.finish import capture_facts, finish_run
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.plan import RunPlan, journal_path, plan_for
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.settings import RunSettings
from raglake.pipeline.staging import BatchRef
from raglake.tasks import engine
from raglake.tasks.capture import capture_batch
from raglake.tasks.land import land

FLOW_THREADS = 4  # the flow's task runner's threads (captures of several batches at once)


def _nothing(*_: object) -> None:
    return None


@dataclass(frozen=True)
class FlowRunHooks:
    """What a Prefect flow run adds to the body: its run named after the run id once the plan has made it,
    and the run's Prefect artifacts once it has landed (lake URL, run id). In process: nothing."""

    name_run: Callable[[str], None] = _nothing
    publish: Callable[[str, str], None] = _nothing


def evaluate_in_process(settings: RunSettings) -> str:
    """The `evaluate` flow's body with its tasks run in this process (raglake.tasks.engine): the same tasks,
    content keys and lake rows, without Prefect, a flow run or artifacts. The local judge is started here
    when no caller did."""
    with engine.in_process(FLOW_THREADS):
        why = "asked for" if settings.orchestration == "in-process" else "auto: no Prefect API configured, a small run"
        engine.run_logger().info("the run's tasks run in this process, without a Prefect flow run (%s)", why)
        with local_judge(settings.judge) as judge:
            return evaluate_run(settings if judge is settings.judge else settings.model_copy(update={"judge": judge}))


def evaluate_run(settings: RunSettings, hooks: FlowRunHooks = FlowRunHooks()) -> str:  # noqa: B008 - frozen
    """Evaluate one target on one golden set and land the run; returns the run id."""
    log = engine.run_logger()
    t0 = time.perf_counter()
    plan = plan_for(settings)  # the caller's plan of this run (inputs checked once), else planned here
    if plan.settings.judge != settings.judge:  # the local judge, started by this flow after the caller planned
        plan = plan.with_judge(settings.judge)
    t_planned = time.perf_counter()
    hooks.name_run(plan.run_id)  # a deployment's run learns its id only now
    batches = plan.stage()  # the tasks get references to staged batches, never the cases themselves
    cases = plan.golden.cases
    log.info(
        "run %s: %d cases of %s in %d batch(es) against %s",
        plan.run_id,
        len(cases),
        plan.golden.name,
        len(batches),
        plan.target.spec,
    )

    journal = journal_path(plan.lake, plan.run_id)
    progress.start("captures", len(cases), "cases")
    target = engine.quote(plan.target)
    batches = engine.map(capture_batch, "batch", batches, target=target, run_id=plan.run_id, journal=journal)
    t_captured = time.perf_counter()

    # the spot-check's sample is drawn by the judge stage among cases that can give a pair
    stage = score_stage(_score_work(plan, batches, plan.spot_sample()), RunnerSpec.parse(settings.runner))

    embedding = stage.embedding
    captures = capture_facts(stage.scored)  # what the run-level figures read, not the captures themselves
    record, run_values, coverage = finish_run(
        plan,
        captures,
        dt.datetime.now(dt.timezone.utc),
        suite_seconds=time.perf_counter() - t0,
        stage_seconds={"inputs": plan.input_seconds, "capture": t_captured - t_planned, **stage.seconds},
        embedding_stats=stage.embedding_stats,
        embedder_key=embedding.key if embedding else None,
        judge=stage.judged,
        captures_reused=sum(b.n for b in batches if b.reused),
    )
    engine.call(land, plan.lake.url, record, stage.scored, run_values, plan.scoring_id, engine.quote(coverage))
    failed = sum(c.failed for c in captures)
    log.info("landed run %s: %d score rows, %d failed capture(s)", plan.run_id, stage.n_scores, failed)
    if log.isEnabledFor(logging.INFO):  # a lake query (~0.1 s) for a line only --verbose shows
        log.info("headline (mean over ok cases): %s", summarize(plan.lake, plan.run_id))
    hooks.publish(plan.lake.url, plan.run_id)
    return plan.run_id


def _score_work(plan: RunPlan, batches: list[BatchRef], spot: SpotSample | None) -> ScoreWork:
    """What the shared embed → judge → score stage needs of this run."""
    return ScoreWork(
        plan.run_id,
        plan.lake.url,
        batches,
        plan.golden.cases,
        plan.metrics,
        plan.config,
        plan.target.known_docs(),
        plan.embedder,
        plan.judge,
        plan.spot_check,
        spot,
        plan.device,
    )


def summarize(lake: Lake, run_id: str) -> str:
    """The run's breakdown over all cases, read back from the lake, as one log line."""
    rows = open_lake(lake).breakdown([run_id], "all")
    return ", ".join(
        f"{r['metric']}={r['mean']:.3f} (n={r['n']})"
        for r in rows
        if r["n"] and r["family"] in ("retrieval", "abstention")
    )
