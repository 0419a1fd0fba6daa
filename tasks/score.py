"""Score a batch of captured cases with the registry's case-level metrics (pure CPU, no retries)."""

from __future__ import annotations

from typing import Any

from prefect import task

from raglake.embed.prepare import EmbeddingSpec
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.runplan import score_key
from raglake.schemas import Capture, GoldenCase
from raglake.scoring import ScoredBatch, score_batch


@task(
    name="score-batch",
    persist_result=True,
    cache_key_fn=lambda ctx, p: score_key(p["cases"], p["captures"], p["versions"], p["config"], p["known_docs"],
                                          p["embedding"], p["judge"]),
)
def score_cases(
    cases: list[GoldenCase],
    captures: list[Capture],
    versions: dict[str, str],
    config: ScoringConfig,
    known_docs: frozenset[str],
    embedding: EmbeddingSpec | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """`judge`: the judge stage's outcomes for these cases (None: no judge configured)."""
    metrics = [get_metric(name) for name in versions]
    encoder = embedding.encoder() if embedding is not None else None
    idf = embedding.idf if embedding is not None else None
    return score_batch(zip(cases, captures), metrics, config, known_docs=known_docs, encoder=encoder, idf=idf,
                       judge=judge)
