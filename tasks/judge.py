"""Judge a batch of captured cases (the IO edge towards the LLM judge: retried inside the gateway,
made idempotent by the ledger, so it is not cached here)."""

from __future__ import annotations

from prefect import task

from raglake.judge.config import JudgeConfig
from raglake.judge.stage import JudgedBatch
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.judging import judge_batch
from raglake.schemas import Capture, GoldenCase


@task(name="judge-batch")
def judge_cases(
    cases: list[GoldenCase],
    captures: list[Capture],
    versions: dict[str, str],
    config: ScoringConfig,
    judge: JudgeConfig,
    lake_url: str,
    run_id: str,
    embedding: EmbeddingSpec | None = None,
    spot_check: JudgeConfig | None = None,
    spot_ids: frozenset[str] = frozenset(),
) -> JudgedBatch:
    metrics = [get_metric(name) for name in versions]
    encoder = embedding.encoder() if embedding is not None else None
    return judge_batch(
        list(zip(cases, captures)), metrics, config, judge, lake_url, run_id, encoder, spot_check, spot_ids
    )
