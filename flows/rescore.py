"""The `rescore` flow: re-score stored captures with the current registry, without calling the target.
Per run: load → decide what changed → embed / judge what is needed → score in batches → land the new
rows under a new scoring id (scores_latest shows them; the old rows stay)."""

from __future__ import annotations

import datetime as dt

from prefect import flow, get_run_logger, task, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from raglake.analysis import LakeQueries
from raglake.embed.cache import default_cache_root
from raglake.embed.prepare import EmbeddingSpec, needs_embedder, text_encoder
from raglake.embed.texts import collect_texts
from raglake.lake.store import Lake
from raglake.metrics.registry import get_metric, metric_versions, select_metrics
from raglake.pipeline.finish import JudgeSummary
from raglake.pipeline.plan import _judges, result_storage, results_dir
from raglake.pipeline.rescore import (
    Decision,
    land_scores,
    load_stored_run,
    new_scoring_id,
    plan_rescore,
    select_runs,
    summarize,
)
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.scoring import ScoredBatch
from raglake.tasks.embed import embed_texts
from raglake.tasks.judge import judge_cases
from raglake.tasks.score import map_scoring, score_cases


@task(name="land-scores", retries=2, retry_delay_seconds=[1, 5])
def land_rescored(lake_url: str, run_id: str, scored: ScoredBatch, scoring_id: str) -> int:
    return land_scores(LakeQueries(Lake(lake_url)), run_id, scored, scoring_id)


@flow(name="rescore", task_runner=ThreadPoolTaskRunner(max_workers=4))
def rescore(
    run_ids: list[str] | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    all_runs: bool = False,
    metrics: list[str] | None = None,
    lake: str | None = None,
    embedder: str | None = None,
    judge: dict | None = None,
    batch_size: int = 100,
    dry_run: bool = False,
    runner: str = "thread",
) -> dict:
    """Re-score runs (ids, a start-date range, or all); returns what was recomputed and kept.
    `runner`: where scoring batches run, `thread` or `dask[:ADDRESS]` (see raglake.pipeline.runners)."""
    log = get_run_logger()
    runner_spec = RunnerSpec.parse(runner)
    q = LakeQueries(Lake(lake))
    runs = select_runs(q, run_ids, since, until, all_runs)
    chosen = select_metrics(metrics)
    judge_config = _judges(judge, None)[0]
    report: dict = {"runs": {}, "dry_run": dry_run}
    for run_id in runs:
        stored = load_stored_run(q, run_id)
        name = embedder or stored.run_config.get("embedder_arg")
        key = text_encoder(name, None).embedder.key if needs_embedder(chosen) else None
        decisions = plan_rescore(q, [run_id], chosen, embedder_key=key, judge_model=judge_config.model if judge_config else None)
        todo = [get_metric(d.metric) for d in decisions if d.compute]
        report["runs"][run_id] = {**summarize(decisions), "decisions": [d.__dict__ for d in decisions]}
        log.info("run %s: recompute %d metric(s), keep %d", run_id, len(todo), len(decisions) - len(todo))
        if dry_run or not todo:
            continue
        report["runs"][run_id]["rows"] = _rescore_run(q, stored, todo, name, judge_config, batch_size, runner_spec)
    return report


def _rescore_run(q: LakeQueries, stored, todo, embedder: str | None, judge_config, batch_size: int,
                 runner: RunnerSpec) -> int:
    """Embed, judge and score what changed for one run, then land it under a new scoring id."""
    pairs = list(zip(stored.cases, stored.captures))
    embedding = None
    if needs_embedder(todo):
        root = str(default_cache_root(q.lake.url) / "embeddings")
        embedding = EmbeddingSpec(embedder, root, text_encoder(embedder, root).embedder.key)
        embed_texts(embedding, collect_texts(pairs, stored.config.k))
    versions = metric_versions(todo)
    judged = None
    if judge_config is not None and any(m.family == "judge" or any(i.startswith("judge:") for i in m.inputs) for m in todo):
        judged = JudgeSummary.of(judge_cases(stored.cases, stored.captures, versions, stored.config, judge_config,
                                             q.lake.url, stored.run_id, embedding))
    batches = [pairs[i : i + batch_size] for i in range(0, len(pairs), batch_size)]
    storage = result_storage(results_dir(q.lake))
    parts = map_scoring(runner, score_cases.with_options(result_storage=storage), dict(
        cases=[[c for c, _ in b] for b in batches], captures=[[cap for _, cap in b] for b in batches],
        versions=unmapped(versions), config=unmapped(stored.config), known_docs=unmapped(stored.known_docs),
        embedding=unmapped(embedding), judge=[judged.for_cases([c.id for c, _ in b]) if judged else None for b in batches],
    ))
    scored = ScoredBatch()
    for part in parts:
        scored.extend(part)
    return land_rescored(q.lake.url, stored.run_id, scored, new_scoring_id(stored.run_id, list(versions)))


__all__ = ["rescore", "Decision"]
