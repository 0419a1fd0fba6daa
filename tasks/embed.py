"""Encode every distinct text of the run once, in large batches, into the vector cache that the
scoring batches then read (so no text is encoded twice, whatever the batching)."""

from __future__ import annotations

from raglake.embed.texts import collect_batch_texts
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.staging import BatchRef, iter_columnar
from raglake.tasks import engine


@engine.task(name="embed-texts")
def embed_texts(embedding: EmbeddingSpec, batches: list[BatchRef], k: int, metrics: list[str]) -> dict[str, float]:
    """The texts the selected metrics read, gathered from the staged batches' columns one batch at a time."""
    texts = collect_batch_texts(iter_columnar(batches), k, [get_metric(name) for name in metrics])
    encoder = embedding.encoder()
    before = (encoder.stats.encoded, encoder.stats.seconds_encoding)
    encoder.encode(texts, caller="metrics")
    return {
        "distinct": float(len(texts)),
        "encoded": float(encoder.stats.encoded - before[0]),
        "seconds": encoder.stats.seconds_encoding - before[1],
    }
