"""Embedding metrics (METRICS.md §4; seeds 003 and 004): cosine on normalised vectors of the run's
embedder, read from the run's vector table (every distinct text encoded once), and BERTScore.
Each cosine metric declares the kinds of text it reads (`texts=`): the run encodes only those.

Versions: the cosine metrics' version 2 (answer_hallucination's 3) takes every cosine from one routine,
raglake.embed.cosine (accumulated in float64), which their columnar forms (raglake.metrics.columnar_vectors)
share, so both paths give the same floats; values moved by less than 1e-7 from the float32 products before."""

from __future__ import annotations

import numpy as np

from raglake.embed.texts import answer_sentences
from raglake.errors import RaglakeError
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, SentenceScore, register
from raglake.metrics.support import ContextSentences, sentence_support

_EMB = dict(family="embedding", seed="003")


def _table(ctx: CaseContext):  # noqa: ANN202 - raglake.embed.texts.VectorTable
    if ctx.embeddings is None or ctx.embeddings.vectors is None:
        raise RaglakeError(
            "embedding metrics need the run's vector table: score through raglake.pipeline.scoring.score_columnar "
            "(or score_files) with an encoder (raglake.embed.encoders)"
        )
    return ctx.embeddings.vectors


def _ok(ctx: CaseContext, value: float) -> Score:
    return Score.ok(float(value), model=ctx.embeddings.vectors.embedder_key)


def _chunk_texts(ctx: CaseContext) -> list[str]:
    return [c.text for c in ctx.top if c.text.strip()]


def _question_chunk_cosines(ctx: CaseContext) -> np.ndarray:
    chunks = _chunk_texts(ctx)
    return _table(ctx).cosines([ctx.case.question] * len(chunks), chunks)


@register(
    "context_relevance",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    scale="cosine",
    higher_is_better=True,
    inputs=("question", "retrieved", "vectors"),
    texts=("question", "top_k_contexts"),
    headline=True,
    **_EMB,
)
def context_relevance(ctx: CaseContext) -> Score:
    """Mean cos(question, chunk) over the top-K chunks retrieved."""
    if not _chunk_texts(ctx):
        return Score.undefined("no_chunks")
    return _ok(ctx, sum(_question_chunk_cosines(ctx).tolist()) / len(_chunk_texts(ctx)))


@register(
    "context_sufficiency",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    scale="0-1",
    higher_is_better=True,
    inputs=("question", "retrieved", "vectors"),
    texts=("question", "top_k_contexts"),
    headline=True,
    worst_cases=True,
    **_EMB,
)
def context_sufficiency(ctx: CaseContext) -> Score:
    """Share of the top K with cos(question, chunk) ≥ θs (default 0.5); missing ranks count as below."""
    if not _chunk_texts(ctx):
        return Score.undefined("no_chunks")
    return _ok(ctx, (_question_chunk_cosines(ctx) >= ctx.config.theta_s).sum() / ctx.k)


@register(
    "answer_relevance_emb",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    scale="cosine",
    higher_is_better=True,
    inputs=("question", "answer", "vectors"),
    texts=("question", "answer"),
    headline=True,
    **_EMB,
)
def answer_relevance_emb(ctx: CaseContext) -> Score:
    """cos(question, answer): does the answer address the question (undefined on an abstention)."""
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if ctx.abstained:
        return Score.undefined("abstained")
    return _ok(ctx, _table(ctx).cosines([ctx.case.question], [ctx.capture.answer])[0])


def _answer_reference(ctx: CaseContext) -> float | Score:
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if not (ctx.case.reference_answer or "").strip():
        return Score.undefined("no_reference")
    return float(_table(ctx).cosines([ctx.capture.answer], [ctx.case.reference_answer])[0])


@register(
    "answer_correctness_emb",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    scale="cosine",
    higher_is_better=True,
    inputs=("answer", "reference_answer", "vectors"),
    texts=("answer", "reference_answer"),
    headline=True,
    worst_cases=True,
    yardsticks=("similarity", "correctness"),
    **_EMB,
)
def answer_correctness_emb(ctx: CaseContext) -> Score:
    """cos(answer, reference answer)."""
    cos = _answer_reference(ctx)
    return cos if isinstance(cos, Score) else _ok(ctx, cos)


@register(
    "semantic_similarity",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    family="embedding",
    seed="004",
    scale="0-1",
    higher_is_better=True,
    inputs=("answer", "reference_answer", "vectors"),
    texts=("answer", "reference_answer"),
    scale_view="semantic_similarity_0_100",  # sql/views/42_semantic_similarity_0_100.sql
    yardsticks=("similarity", "correctness"),
    same_as="answer_correctness_emb",  # max(0, its cosine): the same number wherever the cosine is positive
)
def semantic_similarity(ctx: CaseContext) -> Score:
    """max(0, cos(answer, reference answer)); the 0-100 view is this × 100, rounded to 2 places."""
    cos = _answer_reference(ctx)
    return cos if isinstance(cos, Score) else _ok(ctx, max(0.0, cos))


def _answer_support(ctx: CaseContext) -> list[SentenceScore] | Score:
    """Every answer sentence's support by the top-K chunks' sentences (raglake.metrics.support)."""
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if ctx.abstained:
        return Score.undefined("abstained")
    context = ContextSentences.of([(c.rank, c.text) for c in ctx.top if c.text.strip()])
    if not context.sentences:
        return Score.undefined("no_chunks")
    sentences = answer_sentences(ctx.capture.answer)
    table = _table(ctx)
    return sentence_support(sentences, table.cosine_grid(sentences, context.sentences), context, ctx.config.theta_h)


_SUPPORT = dict(
    inputs=("answer", "retrieved", "vectors"),
    texts=("answer_sentences", "context_sentences"),
    yardsticks=("support",),
    **_EMB,
)


@register("answer_hallucination", version="3", scale="0-1", higher_is_better=False, headline=True, **_SUPPORT)
def answer_hallucination(ctx: CaseContext) -> Score:
    """Share of answer sentences with support < θh (0.7): 0.7·best cos to a chunk sentence + 0.3·word coverage.

    Each sentence's score lands in `sentence_scores` (value h = 1 − support, flagged, best_cos,
    coverage, best_rank); α = 0.3 and θh were chosen on LFQA-Verification's dev half (docs/metaeval.md)."""
    scored = _answer_support(ctx)
    if isinstance(scored, Score):
        return scored
    return Score.ok(
        float(np.mean([s.flagged for s in scored])), model=ctx.embeddings.vectors.embedder_key, detail=tuple(scored)
    )


@register("answer_hallucination_score", version="2", scale="0-1", higher_is_better=False, **_SUPPORT)
def answer_hallucination_score(ctx: CaseContext) -> Score:
    """max over answer sentences of 1 − support: the least supported sentence, continuous (pick your own threshold)."""
    scored = _answer_support(ctx)
    return scored if isinstance(scored, Score) else _ok(ctx, max(s.value for s in scored))


@register(
    "answer_hallucination_chunk_cos",
    version="2",  # cosines in float64 (raglake.embed.cosine)
    scale="0-1",
    higher_is_better=False,
    inputs=("answer", "retrieved", "vectors"),
    texts=("answer_sentences", "top_k_contexts"),
    yardsticks=("support",),
    **_EMB,
)
def answer_hallucination_chunk_cos(ctx: CaseContext) -> Score:
    """The first rule (answer_hallucination v1): share of answer sentences with best cos to a whole chunk < 0.4."""
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if ctx.abstained:
        return Score.undefined("abstained")
    chunks = _chunk_texts(ctx)
    if not chunks:
        return Score.undefined("no_chunks")
    sentences = answer_sentences(ctx.capture.answer)
    table = _table(ctx)
    best = table.cosine_grid(sentences, chunks).max(axis=1)
    return _ok(ctx, (best < ctx.config.theta_h_chunk_cos).mean())


def _bert(ctx: CaseContext, part: str) -> Score:
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if not (ctx.case.reference_answer or "").strip():
        return Score.undefined("no_reference")
    if ctx.embeddings is None or ctx.embeddings.bert_id is None:
        raise RaglakeError(
            "BERTScore needs the batch's token embeddings: score through raglake.pipeline.scoring.score_columnar "
            "(or score_files) with an encoder (raglake.embed.encoders)"
        )
    result = ctx.embeddings.bert.get(ctx.case.id)
    if result is None:
        return Score.undefined("no_tokens")
    return Score.ok(min(1.0, getattr(result, part)), model=ctx.embeddings.bert_id)


# BERTScore reads no sentence vectors (texts=()): its token embeddings of each answer and reference
# are made per batch by raglake.pipeline.embedding.prepare_embeddings
_BERT = dict(
    family="embedding",
    seed="004",
    scale="cosine",
    higher_is_better=True,
    inputs=("answer", "reference_answer", "token_embeddings"),
)


@register("bert_score_f1", headline=True, yardsticks=("similarity", "correctness"), **_BERT)
def bert_score_f1(ctx: CaseContext) -> Score:
    """BERTScore F1: greedy cosine matching of contextual token embeddings (answer vs reference)."""
    return _bert(ctx, "f1")


@register("bert_score_precision", **_BERT)
def bert_score_precision(ctx: CaseContext) -> Score:
    """BERTScore precision: mean over answer tokens of the best match among reference tokens."""
    return _bert(ctx, "precision")


@register("bert_score_recall", **_BERT)
def bert_score_recall(ctx: CaseContext) -> Score:
    """BERTScore recall: mean over reference tokens of the best match among answer tokens."""
    return _bert(ctx, "recall")
