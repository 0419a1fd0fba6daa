"""The `evaluate` flow: load golden set → capture in batches → embed every distinct text once →
judge (when a judge is configured) → score in batches → land."""

from __future__ import annotations

import datetime as dt
import re
import time

from prefect import flow, get_run_logger, task, unmapped
from prefect.task_runners import ThreadPoolTaskRunner

from raglake import progress
from raglake.analysis import LakeQueries
from raglake.embed.texts import collect_texts
from raglake.judge.stage import spot_cases, wanted_steps
from raglake.lake.store import Lake
from raglake.metrics.registry import metric_versions
from raglake.pipeline.finish import JudgeSummary, finish_run
from raglake.pipeline.plan import DEFAULT_TARGET, SAMPLE_GOLDEN, journal_path, plan_run, result_storage
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.scoring import ScoredBatch
from raglake.tasks.capture import capture_batch
from raglake.tasks.embed import embed_texts
from raglake.tasks.judge import judge_cases
from raglake.tasks.land import land
from raglake.tasks.score import map_scoring, score_cases


@flow(name="evaluate", task_runner=ThreadPoolTaskRunner(max_workers=4))
def evaluate(
    golden: str = SAMPLE_GOLDEN,
    target: str = DEFAULT_TARGET,
    k: int = 5,
    lake: str | None = None,
    run_id: str | None = None,
    labels: str | None = None,
    metrics: list[str] | None = None,
    require_snippets: bool = False,
    batch_size: int = 100,
    results: str | None = None,
    embedder: str | None = None,
    scoring: dict | None = None,
    judge: dict | None = None,
    spot_check: dict | None = None,
    runner: str = "thread",
) -> str:
    """Evaluate one target on one golden set and land the run; returns the run id.

    `runner`: where scoring batches run, `thread` or `dask[:ADDRESS]` (see raglake.pipeline.runners)."""
    log = get_run_logger()
    t0 = time.perf_counter()
    plan = plan_run(golden=golden, target=target, lake=lake, k=k, run_id=run_id, labels=labels, metrics=metrics,
                    require_snippets=require_snippets, batch_size=batch_size, results=results,
                    embedder=embedder, scoring=scoring, judge=judge, spot_check=spot_check)
    storage = result_storage(plan.results_dir)
    batches = plan.batches()
    log.info("run %s: %d cases of %s in %d batch(es) against %s", plan.run_id, len(plan.golden.cases),
             plan.golden.name, len(batches), plan.target.spec)

    journal = journal_path(plan.lake, plan.run_id)
    progress.start("captures", len(plan.golden.cases), "cases")
    captured = capture_batch.with_options(result_storage=storage).map(
        unmapped(plan.target), batches, unmapped(plan.run_id), unmapped(journal)
    )
    captures = [c for batch in captured.result() for c in batch]
    per_batch = [captures[i * plan.batch_size : (i + 1) * plan.batch_size] for i in range(len(batches))]
    t_captured = time.perf_counter()

    embedding = plan.embedding_spec()
    embedding_stats = None
    if embedding is not None:  # every distinct text once, before the batches read them
        embedding_stats = embed_texts(embedding, collect_texts(zip(plan.golden.cases, captures), plan.config.k))
    t_embedded = time.perf_counter()

    versions = metric_versions(plan.metrics)
    judged = None
    if plan.judge is not None and wanted_steps(plan.metrics):  # one task: one gateway, one set of limits
        judged = JudgeSummary.of(judge_cases(
            plan.golden.cases, captures, versions, plan.config, plan.judge, plan.lake.url, plan.run_id, embedding,
            plan.spot_check, spot_cases([c.id for c in plan.golden.cases], plan.spot_share, plan.spot_min)))
    t_judged = time.perf_counter()

    scored = ScoredBatch()
    progress.start("scoring", len(plan.golden.cases), "cases")
    for part in map_scoring(RunnerSpec.parse(runner), score_cases.with_options(result_storage=storage), dict(
        cases=batches, captures=per_batch, versions=unmapped(versions), config=unmapped(plan.config),
        known_docs=unmapped(plan.target.known_docs()), embedding=unmapped(embedding),
        judge=[judged.for_cases([c.id for c in b]) if judged else None for b in batches],
    )):
        scored.extend(part)
        progress.advance("scoring", len(set(part.scores["case_id"])))
    t_scored = time.perf_counter()

    record, run_values, coverage = finish_run(
        plan, captures, dt.datetime.now(dt.timezone.utc), suite_seconds=time.perf_counter() - t0,
        stage_seconds={"capture": t_captured - t0, "embedding": t_embedded - t_captured,
                       "judge": t_judged - t_embedded, "scoring": t_scored - t_judged},
        embedding_stats=embedding_stats, embedder_key=embedding.key if embedding else None, judge=judged)
    land(plan.lake.url, record, plan.golden.cases, captures, scored, run_values, plan.scoring_id, coverage)
    failed = sum(c.failed for c in captures)
    log.info("landed run %s: %d score rows, %d failed capture(s)", plan.run_id, len(scored.scores["case_id"]), failed)
    log.info("headline (mean over ok cases): %s", summarize(plan.lake, plan.run_id))
    publish_summary(plan.lake.url, plan.run_id)
    return plan.run_id


@task(name="publish-summary")
def publish_summary(lake_url: str, run_id: str) -> None:
    """The run as Prefect artifacts: a markdown summary (against the previous run of the same target
    and golden set, when there is one) and a table of the headline metrics with n and 95% CIs."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from raglake.report.artifacts import summary_markdown, summary_table

    q = LakeQueries(Lake(lake_url))
    key = re.sub(r"[^a-z0-9-]", "-", q.target_name(run_id).lower())[:40].strip("-") or "run"
    create_markdown_artifact(summary_markdown(q, run_id, q.previous_run(run_id)), key=f"raglake-summary-{key}",
                             description=f"raglake run {run_id}")
    create_table_artifact(summary_table(q, run_id), key=f"raglake-headline-{key}",
                          description=f"headline metrics of run {run_id}: n, mean, 95% CI")


def summarize(lake: Lake, run_id: str) -> str:
    """The run's breakdown over all cases, read back from the lake, as one log line."""
    rows = LakeQueries(lake).breakdown([run_id], "all")
    return ", ".join(f"{r['metric']}={r['mean']:.3f} (n={r['n']})" for r in rows
                     if r["n"] and r["family"] in ("retrieval", "abstention"))
