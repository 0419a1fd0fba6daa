"""The `rescore` flow: re-score stored captures with the current registry, without calling the target.
Per run: load → decide what changed → embed / judge what is needed → score in batches → land the new
rows under a new scoring id (scores_latest shows them; the old rows stay)."""

from __future__ import annotations

from prefect import flow, get_run_logger
from prefect.task_runners import ThreadPoolTaskRunner

from raglake.embed.encoders import text_encoder
from raglake.flows import names
from raglake.flows.stages import ScoreWork, score_stage
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import needs_embedder
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.plan import results_dir
from raglake.pipeline.rescore import (
    Decision,
    land_scores,
    load_stored_run,
    new_scoring_id,
    plan_rescore,
    select_runs,
    summarize,
)
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.settings import auto_batch_size
from raglake.pipeline.staging import ScoredRef, stage_pairs
from raglake.tasks import engine
from raglake.tasks.on_prefect import PREFECT_TASKS  # the tasks run as Prefect task runs here


@engine.task(name="land-scores", retries=2, retry_delay_seconds=[1, 5])
def land_rescored(lake_url: str, run_id: str, scored: list[ScoredRef], scoring_id: str) -> int:
    return land_scores(open_lake(lake_url), run_id, scored, scoring_id)


@flow(name="rescore", flow_run_name=names.rescore_run_name, task_runner=ThreadPoolTaskRunner(max_workers=4))
def rescore(settings: RescoreSettings) -> dict:
    """Re-score runs (ids, a start-date range, or all); returns what was recomputed and kept.
    `settings.runner`: where scoring batches run, `thread` or `dask[:ADDRESS]` (see raglake.pipeline.runners).
    The local judge is started here when no caller did (a deployment's run)."""
    with local_judge(settings.judge) as judge:
        return _rescore(settings if judge is settings.judge else settings.model_copy(update={"judge": judge}))


def _rescore(settings: RescoreSettings) -> dict:
    log = get_run_logger()
    runner = RunnerSpec.parse(settings.runner)
    q = open_lake(settings.lake)
    runs = select_runs(q, settings.run_ids, settings.since, settings.until, settings.all_runs)
    names.name_flow_run(names.rescore_run_name(runs))
    chosen = settings.extensions.select(settings.metrics)  # the eval file's own too
    judge = settings.judge.config() if settings.judge is not None else None
    report: dict = {"runs": {}, "dry_run": settings.dry_run}
    for run_id in runs:
        stored = load_stored_run(q, run_id)
        name = settings.embedder or stored.run_config.get("embedder_arg")
        key = text_encoder(name, None).embedder.key if needs_embedder(chosen) else None
        decisions = settings.decide(
            plan_rescore(q, [run_id], chosen, embedder_key=key, judge_model=judge.model if judge else None)
        )
        todo = [get_metric(d.metric) for d in decisions if d.compute]
        report["runs"][run_id] = {**summarize(decisions), "decisions": [d.__dict__ for d in decisions]}
        log.info("run %s: recompute %d metric(s), keep %d", run_id, len(todo), len(decisions) - len(todo))
        if settings.dry_run or not todo:
            continue
        batches = stage_pairs(
            results_dir(q.lake),
            stored.cases,
            stored.captures,
            auto_batch_size(len(stored.cases), settings.batch_size),
            f"replay-run:{stored.run_id}",
        )
        work = ScoreWork(
            stored.run_id,
            q.lake.url,
            batches,
            stored.cases,
            todo,
            stored.config,
            stored.known_docs,
            name,
            judge,
            device=settings.device,
        )
        stage = score_stage(work, runner)
        scoring_id = new_scoring_id(stored.run_id, [m.name for m in todo])
        report["runs"][run_id]["rows"] = engine.call(land_rescored, q.lake.url, stored.run_id, stage.scored, scoring_id)
    return report


__all__ = ["rescore", "Decision", "PREFECT_TASKS"]
