"""What a batch of embedding metrics needs, prepared once per batch: the vector table of its texts
(read through the run's encoder and cache) and the BERTScore of each case."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raglake.embed.bertscore import BertScore, BertScorer, idf_weights
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.model import Embedder, get_embedder
from raglake.embed.texts import VectorTable, collect_texts
from raglake.errors import ConfigError
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric
from raglake.schemas import Capture, GoldenCase

_LOCK = threading.Lock()
_ENCODERS: dict[tuple[str, str], TextEncoder] = {}
_SCORERS: dict[tuple[str, int | None], BertScorer] = {}


@dataclass
class EmbeddingInputs:
    vectors: VectorTable | None = None
    bert: dict[str, BertScore | None] = field(default_factory=dict)  # case id -> score (None: no tokens)
    bert_id: str | None = None  # embedder key and layer


@dataclass(frozen=True)
class EmbeddingSpec:
    """How a run embeds: the embedder as named, the vector cache folder, the embedder's key
    (name@weights-hash) and, for BERTScore with idf, the run-level idf weights."""

    embedder: str | None
    cache_root: str | None
    key: str
    idf: dict[int, float] | None = None

    def encoder(self) -> TextEncoder:
        return text_encoder(self.embedder, self.cache_root)

    def cache_token(self) -> str:
        """What of the spec changes scores (for cache keys): the model and the idf weights."""
        import hashlib
        import json

        idf = hashlib.sha256(json.dumps(sorted((self.idf or {}).items())).encode()).hexdigest()[:12]
        return f"{self.key}|idf:{idf if self.idf else '-'}"


def needs_vectors(metrics: Sequence[Metric]) -> bool:
    return any("vectors" in m.inputs for m in metrics)


def needs_tokens(metrics: Sequence[Metric]) -> bool:
    return any("token_embeddings" in m.inputs for m in metrics)


def needs_embedder(metrics: Sequence[Metric]) -> bool:
    return needs_vectors(metrics) or needs_tokens(metrics)


def text_encoder(embedder: str | None, cache_root: str | Path | None) -> TextEncoder:
    """The process-wide encoder for (embedder, cache folder): the builtin target and the metrics share it."""
    model = get_embedder(embedder)
    key = (str(model.path), str(cache_root))
    with _LOCK:
        if key not in _ENCODERS:
            _ENCODERS[key] = TextEncoder(model, EmbeddingCache(cache_root, model.key))
        return _ENCODERS[key]


def default_encoder() -> TextEncoder:
    return text_encoder(None, None)


def bert_scorer(embedder: Embedder, layer: int | None) -> BertScorer:
    with _LOCK:
        key = (str(embedder.path), layer)
        if key not in _SCORERS:
            try:
                _SCORERS[key] = BertScorer(embedder, layer)
            except ValueError as e:
                raise ConfigError(str(e)) from None
        return _SCORERS[key]


def reference_idf(encoder: TextEncoder, references: Sequence[str], layer: int | None) -> dict[int, float]:
    """idf over the run's distinct non-empty reference answers (BERTScore's optional weighting)."""
    refs = list(dict.fromkeys(r for r in references if r and r.strip()))
    return idf_weights(bert_scorer(encoder.embedder, layer).token_ids(refs))


def prepare_embeddings(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    encoder: TextEncoder | None,
    idf: dict[int, float] | None = None,
) -> EmbeddingInputs | None:
    """None when no embedding metric is asked for; otherwise the batch's vectors and BERTScores."""
    if not needs_embedder(metrics):
        return None
    if encoder is None:
        raise ConfigError("embedding metrics were selected but no embedder was given")
    inputs = EmbeddingInputs()
    if needs_vectors(metrics):
        inputs.vectors = VectorTable.encode(encoder, collect_texts(pairs, config.k), caller="metrics")
    if needs_tokens(metrics):
        scorer = bert_scorer(encoder.embedder, config.bertscore_layer)
        todo = [(c, cap) for c, cap in pairs
                if not cap.failed and cap.answer.strip() and (c.reference_answer or "").strip()]
        if config.bertscore_idf and idf is None:
            idf = reference_idf(encoder, [c.reference_answer for c, _ in pairs], config.bertscore_layer)
        scores = scorer.score([cap.answer for _, cap in todo], [c.reference_answer for c, _ in todo],
                              idf if config.bertscore_idf else None)
        inputs.bert = {c.id: s for (c, _), s in zip(todo, scores)}
        inputs.bert_id = scorer.id + (":idf" if config.bertscore_idf else "")
    return inputs
