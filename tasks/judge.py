"""Judge a run's captured cases (the IO edge towards the LLM judge: retried inside the gateway, made
idempotent by the ledger, so it is not cached here). One task: one gateway, one set of limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from raglake.judge.config import JudgeConfig
from raglake.judge.stage import SpotSample
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.finish import JudgeSummary
from raglake.pipeline.judging import judge_batch
from raglake.pipeline.staging import BatchRef, iter_pairs, stage_judged
from raglake.tasks import engine


@dataclass(frozen=True)
class JudgeWork:
    """What the judge stage needs besides the batches."""

    versions: dict[str, str]
    config: ScoringConfig
    judge: JudgeConfig
    lake_url: str
    run_id: str
    embedding: EmbeddingSpec | None = None
    spot_check: JudgeConfig | None = None
    spot_sample: SpotSample | None = None


@engine.task(name="judge-batch")
def judge_cases(work: JudgeWork, batches: list[BatchRef]) -> tuple[list[BatchRef], dict[str, Any]]:
    """Every judge step the run's cases need; each batch comes back pointing at its staged outcomes,
    with the stage's figures (calls, tokens, cost, spot-check pairs)."""
    metrics = [get_metric(name) for name in work.versions]
    encoder = work.embedding.encoder() if work.embedding is not None else None
    judged = judge_batch(
        list(iter_pairs(batches)),
        metrics,
        work.config,
        work.judge,
        work.lake_url,
        work.run_id,
        encoder,
        work.spot_check,
        work.spot_sample,
    )
    summary = JudgeSummary.of(judged)
    staged = [stage_judged(b, work.run_id, summary.for_cases([c.id for c in b.read_cases()])) for b in batches]
    return staged, summary.stats
