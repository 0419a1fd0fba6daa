"""What a batch of embedding metrics needs, prepared once per batch (the pipeline's embedding stage): the
vector table of its texts (read through the run's encoder and cache) and the BERTScore of each case.
The models themselves come from raglake.embed.encoders."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.bertscore import BertScore, idf_weights
from raglake.embed.cache import TextEncoder
from raglake.embed.encoders import bert_scorer, get_embedder, text_encoder
from raglake.embed.model import is_packaged, resolve_device
from raglake.embed.texts import VectorTable, collect_batch_texts, collect_texts
from raglake.errors import ConfigError
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric
from raglake.schemas import Capture, GoldenCase


@dataclass
class EmbeddingInputs:
    vectors: VectorTable | None = None
    bert: dict[str, BertScore | None] = field(default_factory=dict)  # case id -> score (None: no tokens)
    bert_id: str | None = None  # embedder key and layer


@dataclass(frozen=True)
class EmbeddingSpec:
    """How a run embeds: the embedder as named, the vector cache folder, the embedder's key
    (name@weights-hash), for BERTScore with idf the run-level idf weights, and the device the
    embedder runs on (resolved: cpu, cuda or mps)."""

    embedder: str | None
    cache_root: str | None
    key: str
    idf: dict[int, float] | None = None
    device: str = "cpu"

    def encoder(self) -> TextEncoder:
        return text_encoder(self.embedder, self.cache_root, self.device)

    def cache_token(self) -> str:
        """What of the spec changes scores (for cache keys): the model, the idf weights and, off the cpu,
        the device (its vectors agree with the cpu's to about 1e-6, not bit for bit; a cpu run's token,
        and so its cached scores, are the same as before devices existed)."""
        idf = hashlib.sha256(json.dumps(sorted((self.idf or {}).items())).encode()).hexdigest()[:12]
        return f"{self.key}|idf:{idf if self.idf else '-'}" + ("" if self.device == "cpu" else f"|{self.device}")


def needs_vectors(metrics: Sequence[Metric]) -> bool:
    """Whether some metric reads the vector table (declares texts); a judge metric that reads vectors
    encodes its own texts through the encoder."""
    return any(m.texts for m in metrics)


def needs_tokens(metrics: Sequence[Metric]) -> bool:
    return any("token_embeddings" in m.inputs for m in metrics)


def needs_embedder(metrics: Sequence[Metric]) -> bool:
    return any("vectors" in m.inputs or "token_embeddings" in m.inputs for m in metrics)


def embeds_packaged_on_cpu(metrics: Sequence[Metric], embedder: str | None, device: str) -> bool:
    """Whether a run embeds with the packaged default on the cpu: what a model process started before its
    plan (raglake.embed.process.start_early) is for."""
    return (
        needs_embedder(metrics)
        and is_packaged(embedder)
        and device in ("auto", "cpu")
        and resolve_device(device) == "cpu"
    )


def load_embedder_early(
    metrics: list[Metric], embedder: str | None, device: str, *, warm: bool = True
) -> threading.Thread | None:
    """Start loading the embedder a run will use (importing torch and sentence-transformers, then the
    weights: seconds of CPU, then, with `warm`, one small warm-up encode) in a daemon thread, when a selected
    metric embeds; the command line and the API call it before Prefect's server starts, so that the load
    overlaps the wait instead of sitting inside the embedding stage. Warm only when a server start hides it:
    a run in this process has no wait to fill, and its first encode is small (~0.2 s of warm-up against
    ~0.04 s saved at 20 cases). The stage then finds the model loaded (or waits for the
    load under way). A known failure (no such model or device, unreadable weights, torch failing on the
    device) is kept on the thread (`failure`), not raised here: the stage's own load raises it again, in
    context, with the run's error handling."""
    if not needs_embedder(metrics):
        return None

    def load() -> None:
        try:
            model = get_embedder(embedder, device)
            model.key  # noqa: B018 - hashes the weights (the run's embedder key)
            model.load(warm=warm)
        except (ConfigError, OSError, RuntimeError) as e:  # RuntimeError: torch's (a device out of memory)
            thread.failure = e  # type: ignore[attr-defined]

    thread = threading.Thread(target=load, name="raglake-embedder-load", daemon=True)
    thread.start()
    _EARLY_LOADS.append(thread)
    return thread


_EARLY_LOADS: list[threading.Thread] = []


def settle_early_loads(timeout_s: float = 120.0) -> None:
    """Wait for the loads load_embedder_early started (a command that stops early, on an error before its run):
    a process that exits while a thread is inside torch's native start-up aborts ('terminate called without an
    active exception', SIGABRT) instead of exiting with its one-line error."""
    while _EARLY_LOADS:
        _EARLY_LOADS.pop().join(timeout_s)


def embedding_device(metrics: Sequence[Metric], device: str) -> str | None:
    """The device a run's embedder runs on for its --device (cpu, cuda or mps; what the run records),
    None when no selected metric embeds."""
    return resolve_device(device) if needs_embedder(metrics) else None


def reference_idf(encoder: TextEncoder, references: Sequence[str], layer: int | None) -> dict[int, float]:
    """idf over the run's distinct non-empty reference answers (BERTScore's optional weighting)."""
    refs = list(dict.fromkeys(r for r in references if r and r.strip()))
    return idf_weights(bert_scorer(encoder.embedder, layer).token_ids(refs))


def batch_vectors(
    batch: ColumnarBatch, metrics: Sequence[Metric], config: ScoringConfig, encoder: TextEncoder | None
) -> EmbeddingInputs | None:
    """prepare_embeddings' vector table for a columnar batch, its texts read from the columns (no model is
    built): what the rows a vector metric's columnar form leaves to its function read."""
    if not needs_vectors(metrics):
        return None
    if encoder is None:
        raise ConfigError("embedding metrics were selected but no embedder was given")
    return EmbeddingInputs(VectorTable.encode(encoder, collect_batch_texts([batch], config.k, metrics)))


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
        inputs.vectors = VectorTable.encode(encoder, collect_texts(pairs, config.k, metrics), caller="metrics")
    if needs_tokens(metrics):
        scorer = bert_scorer(encoder.embedder, config.bertscore_layer)
        todo = [
            (c, cap) for c, cap in pairs if not cap.failed and cap.answer.strip() and (c.reference_answer or "").strip()
        ]
        if config.bertscore_idf and idf is None:
            idf = reference_idf(encoder, [c.reference_answer for c, _ in pairs], config.bertscore_layer)
        scores = scorer.score(
            [cap.answer for _, cap in todo],
            [c.reference_answer for c, _ in todo],
            idf if config.bertscore_idf else None,
        )
        inputs.bert = {c.id: s for (c, _), s in zip(todo, scores)}
        inputs.bert_id = scorer.id + (":idf" if config.bertscore_idf else "")
    return inputs
