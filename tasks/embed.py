"""Encode every distinct text of the run once, in large batches, into the vector cache that the
scoring batches then read (so no text is encoded twice, whatever the batching)."""

from __future__ import annotations

from prefect import task

from raglake.pipeline.embedding import EmbeddingSpec


@task(name="embed-texts")
def embed_texts(embedding: EmbeddingSpec, texts: list[str]) -> dict[str, float]:
    encoder = embedding.encoder()
    before = (encoder.stats.encoded, encoder.stats.seconds_encoding)
    encoder.encode(texts, caller="metrics")
    return {
        "distinct": float(len(set(texts))),
        "encoded": float(encoder.stats.encoded - before[0]),
        "seconds": encoder.stats.seconds_encoding - before[1],
    }
