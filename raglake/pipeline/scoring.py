"""Scoring a batch of cases with the registry's case-level metrics: long rows of scores, the
labels each case carried (every source) and the retrieved chunks with the supports they match."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raglake.anchors import heading_string
from raglake.embed.encoders import default_encoder
from raglake.lake.tables import TABLES
from raglake.metrics.context import CaseContext, Label, ScoringConfig
from raglake.metrics.registry import Metric, Score, get_metric
from raglake.pipeline.embedding import needs_embedder, prepare_embeddings
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, Capture, GoldenCase

# the lake's schemas are the one definition of these columns; landing adds a scoring's id and time to scores
SCORING_COLUMNS = ("scoring_id", "scored_at")
SCORE_COLUMNS = tuple(n for n in TABLES["scores"].schema.names if n not in SCORING_COLUMNS)
LABEL_COLUMNS = tuple(TABLES["labels"].schema.names)
CHUNK_COLUMNS = tuple(TABLES["chunks"].schema.names)


def _columns(names: Sequence[str]) -> dict[str, list[Any]]:
    return {c: [] for c in names}


@dataclass
class ScoredBatch:
    scores: dict[str, list[Any]] = field(default_factory=lambda: _columns(SCORE_COLUMNS))
    labels: dict[str, list[Any]] = field(default_factory=lambda: _columns(LABEL_COLUMNS))
    chunks: dict[str, list[Any]] = field(default_factory=lambda: _columns(CHUNK_COLUMNS))

    def extend(self, other: ScoredBatch) -> None:
        for mine, theirs in ((self.scores, other.scores), (self.labels, other.labels), (self.chunks, other.chunks)):
            for name, values in theirs.items():
                mine[name].extend(values)


def precondition(metric: Metric, case: GoldenCase, capture: Capture) -> Score | None:
    """The `undefined` score every metric shares: failed capture, or a case the metric does not apply to."""
    if capture.failed:
        return Score.undefined("capture_failed")
    if metric.applies_to == "answerable" and not case.answerable:
        return Score.undefined("not_answerable")
    if metric.applies_to == "unanswerable" and case.answerable:
        return Score.undefined("answerable")
    return None


def score_context(ctx: CaseContext, metrics: Sequence[Metric]) -> list[tuple[Metric, Score]]:
    return [(m, precondition(m, ctx.case, ctx.capture) or m.fn(ctx)) for m in metrics]


def score_one(
    case: GoldenCase,
    capture: Capture,
    metric: str,
    *,
    k: int = 5,
    require_snippets: bool = False,
    encoder: Any = None,
    **settings: Any,
) -> Score:
    """One metric for one case (handy in notebooks and tests); embedding metrics use `encoder`, or
    the default embedder without a disk cache."""
    metrics = [get_metric(metric)]
    config = ScoringConfig(k=k, require_snippets=require_snippets, **settings)
    if encoder is None and needs_embedder(metrics):
        encoder = default_encoder()
    embeddings = prepare_embeddings([(case, capture)], metrics, config, encoder)
    ctx = CaseContext(case, capture, config, embeddings=embeddings)
    return score_context(ctx, metrics)[0][1]


def _add_scores(out: dict[str, list[Any]], case_id: str, scored: list[tuple[Metric, Score]]) -> None:
    for metric, score in scored:
        out["case_id"].append(case_id)
        out["metric"].append(metric.name)
        out["value"].append(score.value)
        out["status"].append(score.status)
        out["reason"].append(score.reason)
        out["metric_version"].append(metric.version)
        out["label_source"].append(score.source)
        out["embedder"].append(score.model)
        out["judge_model"].append(score.judge_model)
        out["prompt_id"].append(score.prompt_id)
        out["prompt_version"].append(score.prompt_version)
        out["judge_call"].append(score.judge_call)


def _add_labels(out: dict[str, list[Any]], ctx: CaseContext) -> None:
    def row(level: str, rank: int | None, name: str, label: Label) -> None:
        for col, value in zip(LABEL_COLUMNS, (ctx.case.id, level, rank, name, label.value, label.source)):
            out[col].append(value)

    for chunk, lab, judged in zip(ctx.top, ctx.chunk_labels, ctx.judge_chunk_labels):
        for name in CHUNK_LABELS:
            if lab is not None and getattr(lab, name) is not None:
                row("chunk", chunk.rank, name, Label(getattr(lab, name), "human"))
            if judged is not None and judged.get(name) is not None:
                row("chunk", chunk.rank, name, Label(int(judged[name]), judged["source"]))
    if ctx.capture.failed:
        return
    for source in (ctx.human_answer_labels, ctx.judge_labels, ctx.rule_answer_labels):
        for name in ANSWER_LABELS:
            if name in source:
                row("answer", None, name, source[name])


def _add_chunks(out: dict[str, list[Any]], ctx: CaseContext) -> None:
    for chunk, matched in zip(ctx.capture.retrieved, ctx.chunk_matches):
        values = (
            ctx.case.id,
            chunk.rank,
            chunk.rel_path,
            heading_string(chunk.heading_path),
            chunk.text,
            chunk.score,
            chunk.chunk_id,
            chunk.rank <= ctx.k,
            sorted(matched),
        )
        for col, value in zip(CHUNK_COLUMNS, values):
            out[col].append(value)


def score_batch(
    pairs: Iterable[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    *,
    known_docs: frozenset[str] = frozenset(),
    encoder: Any = None,
    idf: dict[int, float] | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """Scores (one row per case × metric), labels and chunks of a batch of (case, capture) pairs.

    `encoder` (a raglake.embed.cache.TextEncoder) is needed when embedding metrics are among `metrics`;
    `judge` holds the judge stage's outcomes (case id -> step name -> StepOutcome), None when no judge is configured."""
    pairs = list(pairs)
    embeddings = prepare_embeddings(pairs, metrics, config, encoder, idf)
    batch = ScoredBatch()
    for case, capture in pairs:
        ctx = CaseContext(
            case,
            capture,
            config,
            known_docs=known_docs,
            embeddings=embeddings,
            judge=None if judge is None else judge.get(case.id, {}),
        )
        _add_scores(batch.scores, case.id, score_context(ctx, metrics))
        _add_labels(batch.labels, ctx)
        _add_chunks(batch.chunks, ctx)
    return batch
