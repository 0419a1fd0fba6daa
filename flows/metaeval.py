"""The `metaeval` flow: labelled items → (per yardstick) embed → judge → score with the shared stages →
agreement with the labels (bootstrap intervals) → the lake's `metaeval` table. Only references travel."""

from __future__ import annotations

import dataclasses

from prefect import flow, get_run_logger
from prefect.task_runners import ThreadPoolTaskRunner

from raglake.flows import names
from raglake.flows.stages import ScoreWork, score_stage
from raglake.metaeval.plan import MetaevalSettings, plan_metaeval
from raglake.metaeval.run import AgreementWork
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.runners import RunnerSpec
from raglake.tasks import engine
from raglake.tasks.metaeval import land_metaeval, measure_agreement
from raglake.tasks.on_prefect import PREFECT_TASKS  # the tasks run as Prefect task runs here


def metaeval_run_name() -> str:
    return names._settings_field("metaeval_id") or "metaeval"


@flow(name="metaeval", flow_run_name=metaeval_run_name, task_runner=ThreadPoolTaskRunner(max_workers=4))
def metaeval(settings: MetaevalSettings) -> str:
    """Measure how far the metrics (and the judge, when one is given) agree with people; returns the id. The
    local judge is started here when no caller did (a deployment's run)."""
    with local_judge(settings.judge) as judge:
        return _metaeval(settings if judge is settings.judge else settings.model_copy(update={"judge": judge}))


def _metaeval(settings: MetaevalSettings) -> str:
    log = get_run_logger()
    plan = plan_metaeval(settings)
    names.name_flow_run(plan.metaeval_id)
    judge = settings.judge.config() if settings.judge is not None else None
    scored, embedder_key = [], None
    for group in plan.groups:
        log.info(
            "%s: %d cases, metrics %s",
            group.yardstick,
            sum(b.n for b in group.batches),
            [m.name for m in group.metrics],
        )
        work = ScoreWork(
            plan.metaeval_id,
            plan.lake.url,
            group.batches,
            [],
            group.metrics,
            group.config,
            frozenset(),
            settings.embedder,
            judge,
            device=settings.device,
        )
        stage = score_stage(work, RunnerSpec.parse("thread"))
        scored.extend(stage.scored)
        embedder_key = embedder_key or (stage.embedding.key if stage.embedding else None)
    config = {
        "scoring": dataclasses.asdict(plan.groups[0].config) | {"k": None},
        "max_items": settings.max_items,
        "embedder": embedder_key,
        "judge": settings.judge.model if settings.judge else None,
    }
    work = AgreementWork(
        plan.metaeval_id,
        plan.results_dir,
        plan.items_path,
        {g.yardstick: [m.name for m in g.metrics] for g in plan.groups},
        settings.resamples,
        settings.seed,
        plan.created_at,
        plan.totals,
        plan.sources,
        config,
    )
    path = engine.call(measure_agreement, engine.quote(work), scored)
    n = engine.call(land_metaeval, plan.lake.url, plan.metaeval_id, plan.results_dir, path)
    log.info("landed meta-evaluation %s: %d rows", plan.metaeval_id, n)
    return plan.metaeval_id


__all__ = ["metaeval", "metaeval_run_name", "PREFECT_TASKS"]
