"""Landing runs in a test lake without Prefect (the flow's steps, called directly)."""

from __future__ import annotations

import datetime as dt

from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import all_metrics, metric_versions
from raglake.pipeline.plan import plan_run
from raglake.pipeline.rows import land_scored_run
from raglake.pipeline.scoring import score_batch
from raglake.pipeline.settings import RunSettings


def land(lake: str, golden: str, target: str, run_id: str, *, minutes: int = 0, k: int = 5, **options) -> str:
    """Score `target` on `golden` and land it as `run_id`, started `minutes` after a fixed instant."""
    plan = plan_run(RunSettings(golden=golden, target=target, lake=lake, run_id=run_id, k=k, **options))
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=minutes)
    captures = plan.target.capture(plan.golden.cases)
    embedding = plan.embedding_spec()
    scored = score_batch(
        zip(plan.golden.cases, captures),
        plan.metrics,
        plan.config,
        encoder=embedding.encoder() if embedding else None,
        idf=embedding.idf if embedding else None,
    )
    run_level = all_metrics(level="run")
    values = [v for m in run_level for v in m.fn(RunInputs(captures))]
    record = plan.record(
        plan.started_at + dt.timedelta(seconds=5), len(captures), embedder_key=embedding.key if embedding else None
    )
    record.metric_versions.update(metric_versions(run_level))
    land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, values, plan.scoring_id)
    return run_id
