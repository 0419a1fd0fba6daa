"""Columnar forms of the cosine metrics (raglake.metrics.embedding) over a whole batch: the texts read from
the batch's columns (no pydantic model per case), each kind's vectors fetched once from the run's encoder
(what the embed stage put in its cache), every cosine through raglake.embed.cosine, the routine the metrics'
functions use, so both paths give the same floats (tests/test_columnar_vectors.py). Sums over a case's
chunks follow Python's sum() (ordered_sums), as the functions take them. Rows whose answer has no sentence
(or a cosine that is NaN) are left to the metric's function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from raglake.embed.cosine import pair_cosines
from raglake.embed.texts import answer_sentences
from raglake.errors import ConfigError
from raglake.metrics import embedding  # noqa: F401 - registers the metrics these are the forms of
from raglake.metrics.columnar import BatchContext, Column, ordered_sums
from raglake.metrics.columnar_answers import abstained
from raglake.metrics.registry import Score, SentenceScore, columnar_form
from raglake.metrics.support import ContextSentences, supported


@dataclass
class Vectors:
    """One kind of text's vectors in a batch: a matrix of its distinct texts and each item's row in it."""

    matrix: np.ndarray
    rows: np.ndarray  # per item


def _spans(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group, position within it) of every element of groups of these sizes, in order."""
    group = np.repeat(np.arange(len(sizes)), sizes)
    return group, np.arange(len(group)) - np.repeat(np.cumsum(sizes) - sizes, sizes)


def _best_matches(
    left: Vectors, left_rows: np.ndarray, right: Vectors, starts: np.ndarray, sizes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each left item (its row in `left`), its best cosine to the right items starts[i] .. starts[i] +
    sizes[i] - 1 (every size ≥ 1) and the position among them of the first that reaches it (np.argmax's)."""
    if not len(sizes):
        return np.zeros(0), np.zeros(0, dtype=np.intp)
    item, position = _spans(sizes)
    cos = pair_cosines(left.matrix, left_rows[item], right.matrix, right.rows[starts[item] + position])
    bounds = np.cumsum(sizes) - sizes
    best = np.maximum.reduceat(cos, bounds)
    first = np.minimum.reduceat(np.where(cos == best[item], position, np.iinfo(np.intp).max), bounds)
    return best, first


def _case_cosines(left: Vectors, right: Vectors, rows: np.ndarray) -> np.ndarray:
    """Per case, the cosine of its one left text to its one right text where `rows` (a mask), 0 elsewhere."""
    at = np.flatnonzero(rows)
    values = np.zeros(len(rows))
    values[at] = pair_cosines(left.matrix, left.rows[at], right.matrix, right.rows[at])
    return values


class BatchTexts:
    """What the cosine metrics read of a batch, worked out once (BatchContext.cached)."""

    def __init__(self, bc: BatchContext):
        if bc.encoder is None:  # as raglake.pipeline.embedding.prepare_embeddings says it
            raise ConfigError("embedding metrics were selected but no embedder was given")
        self.bc, self.n, self.encoder = bc, bc.n, bc.encoder
        self.usable = ~bc.failed
        self.questions = bc.case_column("question").to_pylist()
        self.answers = [a or "" for a in bc.answers.to_pylist()]
        self.references = bc.case_column("reference_answer").to_pylist()
        self.answered = self.usable & np.array([bool(a.strip()) for a in self.answers], dtype=bool)
        self.referenced = np.array([bool((r or "").strip()) for r in self.references], dtype=bool)
        self.abstained = abstained(bc)[0]

    def vectors(self, texts: list[str]) -> Vectors:
        index: dict[str, int] = {}
        rows = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype=np.intp, count=len(texts))
        return Vectors(self.encoder.encode(list(index), caller="metrics"), rows)

    def by_case(self, texts: list[str | None], rows: np.ndarray) -> Vectors:
        """Vectors of one text per case (those of `rows`; row -1 elsewhere)."""
        wanted = np.flatnonzero(rows)
        found = self.vectors([texts[i] for i in wanted])
        out = np.full(self.n, -1, dtype=np.intp)
        out[wanted] = found.rows
        return Vectors(found.matrix, out)

    @cached_property
    def question(self) -> Vectors:
        return self.by_case(self.questions, self.usable)

    @cached_property
    def answer(self) -> Vectors:
        return self.by_case(self.answers, self.answered)

    @cached_property
    def reference(self) -> Vectors:
        return self.by_case(self.references, self.answered & self.referenced)

    @cached_property
    def chunks(self) -> tuple[np.ndarray, list[int], list[str]]:
        """(case, rank, text) of every non-blank top-K chunk of a usable case, as Capture.top_k orders them."""
        bc = self.bc
        chunks = bc.captures.chunks
        texts = chunks.column("text").to_pylist() if len(chunks) else []
        keep = bc.top & self.usable[bc.chunk_case] if len(chunks) else np.zeros(0, dtype=bool)
        at = [i for i in np.flatnonzero(keep).tolist() if texts[i] and texts[i].strip()]
        index = np.asarray(at, dtype=np.intp)
        return bc.chunk_case[index], bc.chunk_rank[index].tolist(), [texts[i] for i in at]

    @cached_property
    def chunk_vectors(self) -> Vectors:
        return self.vectors(self.chunks[2])

    @cached_property
    def n_chunks(self) -> np.ndarray:
        return np.bincount(self.chunks[0], minlength=self.n)

    @cached_property
    def sentences(self) -> list[list[str]]:
        """Each answered case's answer sentences (others: none)."""
        return [answer_sentences(a) if ok else [] for a, ok in zip(self.answers, self.answered.tolist())]

    @cached_property
    def sentence_vectors(self) -> tuple[np.ndarray, Vectors]:
        """(case of each answer sentence, their vectors), cases in order."""
        sizes = np.array([len(s) for s in self.sentences], dtype=np.intp)
        return np.repeat(np.arange(self.n), sizes), self.vectors([s for case in self.sentences for s in case])

    @cached_property
    def question_chunk_cosines(self) -> np.ndarray:
        q, c = self.question, self.chunk_vectors
        return pair_cosines(q.matrix, q.rows[self.chunks[0]], c.matrix, c.rows)

    def best_chunk_cosines(self, with_chunks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(case of each answer sentence of the cases `with_chunks`, its best cosine to one of their chunks)."""
        case, vectors = self.sentence_vectors
        keep = np.flatnonzero(with_chunks[case])
        starts = np.cumsum(self.n_chunks) - self.n_chunks
        owner = case[keep]
        best, _ = _best_matches(vectors, vectors.rows[keep], self.chunk_vectors, starts[owner], self.n_chunks[owner])
        return owner, best


def _texts(bc: BatchContext) -> BatchTexts:
    return bc.cached("vector_texts", lambda: BatchTexts(bc))


def _ok(col: Column, rows: np.ndarray, values: np.ndarray, key: str) -> None:
    """Values with the embedder's key on `rows` (a mask), as Score.ok(value, model=key) gives them; a NaN
    (an embedder's NaN vector) is left to the metric's function, which refuses it as Score.ok does."""
    nan = rows & np.isnan(values)
    col.defer(nan)
    rows = rows & ~nan
    col.ok(rows, values)
    col.meta.setdefault("model", np.full(len(col.value), -1, dtype=np.int32))[rows] = col.code(key)


def _answer_reasons(col: Column, t: BatchTexts, *, abstention: bool = True) -> np.ndarray:
    """empty_answer, then (with abstention) abstained, as the functions check them; the rows left."""
    col.undefined(~t.answered, "empty_answer")
    rows = t.answered.copy()
    if abstention:
        col.undefined(rows & t.abstained, "abstained")
        rows &= ~t.abstained
    return rows


def _over_chunks(bc: BatchContext, value: Callable[[BatchTexts, np.ndarray], np.ndarray]) -> Column:
    """no_chunks without a non-blank top-K chunk, else value(texts, has) from the question-chunk cosines."""
    t, col = _texts(bc), Column(bc.n)
    has = t.n_chunks > 0
    col.undefined(~has, "no_chunks")
    _ok(col, has, value(t, has), t.encoder.embedder.key)
    return col


@columnar_form("context_relevance")
def _context_relevance(bc: BatchContext) -> Column:
    def mean(t: BatchTexts, has: np.ndarray) -> np.ndarray:
        sums = ordered_sums(t.chunks[0], t.question_chunk_cosines, bc.n)
        return np.divide(sums, t.n_chunks, out=np.zeros(bc.n), where=has)

    return _over_chunks(bc, mean)


@columnar_form("context_sufficiency")
def _context_sufficiency(bc: BatchContext) -> Column:
    def share(t: BatchTexts, _has: np.ndarray) -> np.ndarray:
        above = t.question_chunk_cosines >= bc.config.theta_s
        return np.bincount(t.chunks[0][above], minlength=bc.n) / bc.k

    return _over_chunks(bc, share)


@columnar_form("answer_relevance_emb")
def _answer_relevance(bc: BatchContext) -> Column:
    t, col = _texts(bc), Column(bc.n)
    rows = _answer_reasons(col, t)
    _ok(col, rows, _case_cosines(t.question, t.answer, rows), t.encoder.embedder.key)
    return col


def _answer_reference(bc: BatchContext) -> tuple[Column, BatchTexts, np.ndarray, np.ndarray]:
    t, col = _texts(bc), Column(bc.n)
    rows = _answer_reasons(col, t, abstention=False)
    col.undefined(rows & ~t.referenced, "no_reference")
    rows &= t.referenced
    return col, t, rows, _case_cosines(t.answer, t.reference, rows)


@columnar_form("answer_correctness_emb")
def _answer_correctness(bc: BatchContext) -> Column:
    col, t, rows, cos = _answer_reference(bc)
    _ok(col, rows, cos, t.encoder.embedder.key)
    return col


@columnar_form("semantic_similarity")
def _semantic_similarity(bc: BatchContext) -> Column:
    col, t, rows, cos = _answer_reference(bc)
    _ok(col, rows, np.where(cos > 0.0, cos, 0.0), t.encoder.embedder.key)  # max(0.0, cos)
    return col


@columnar_form("answer_hallucination_chunk_cos")
def _chunk_cos(bc: BatchContext) -> Column:
    t, col = _texts(bc), Column(bc.n)
    rows = _answer_reasons(col, t)
    col.undefined(rows & (t.n_chunks == 0), "no_chunks")
    rows &= t.n_chunks > 0
    n_sentences = np.array([len(s) for s in t.sentences])
    col.defer(rows & (n_sentences == 0))
    rows &= n_sentences > 0
    case, best = t.best_chunk_cosines(rows)
    low = np.bincount(case[best < bc.config.theta_h_chunk_cos], minlength=bc.n)
    _ok(col, rows, np.divide(low, n_sentences, out=np.zeros(bc.n), where=rows), t.encoder.embedder.key)
    return col


def _support(bc: BatchContext) -> list[list[SentenceScore] | str | None]:
    """Per case: its answer sentences' scores (raglake.metrics.support), an undefined reason, or None where the
    metric's function must say (no answer sentence, a NaN cosine)."""
    return bc.cached("sentence_support", lambda: _sentence_support(bc))


def _sentence_support(bc: BatchContext) -> list[list[SentenceScore] | str | None]:
    t = _texts(bc)
    out: list[list[SentenceScore] | str | None] = ["empty_answer"] * bc.n
    rows = t.answered & ~t.abstained
    for i in np.flatnonzero(t.answered & t.abstained).tolist():
        out[i] = "abstained"
    case, rank, text = t.chunks
    bounds = np.concatenate([[0], np.cumsum(t.n_chunks)]).tolist()
    contexts: dict[int, ContextSentences] = {}
    for i in np.flatnonzero(rows).tolist():
        context = ContextSentences.of(list(zip(rank[bounds[i] : bounds[i + 1]], text[bounds[i] : bounds[i + 1]])))
        if not context.sentences:
            out[i] = "no_chunks"
        elif not t.sentences[i]:
            out[i] = None
        else:
            contexts[i] = context
    scored = sorted(contexts)
    if not scored:
        return out
    sentences = [s for i in scored for s in t.sentences[i]]
    context_texts = [s for i in scored for s in contexts[i].sentences]
    a, c = t.vectors(sentences), t.vectors(context_texts)
    n_s = np.array([len(t.sentences[i]) for i in scored], dtype=np.intp)
    n_c = np.array([len(contexts[i].sentences) for i in scored], dtype=np.intp)
    owner, _ = _spans(n_s)  # each answer sentence's case (index into `scored`)
    best, first = _best_matches(a, a.rows, c, (np.cumsum(n_c) - n_c)[owner], n_c[owner])
    nan = np.isnan(best)
    best_l, first_l = best.tolist(), first.tolist()
    k = 0
    for j, i in enumerate(scored):
        context, count = contexts[i], int(n_s[j])
        if nan[k : k + count].any():
            out[i] = None
        else:
            out[i] = [
                supported(x, s, best_l[k + x], context.ranks[first_l[k + x]], context.words, bc.config.theta_h)
                for x, s in enumerate(t.sentences[i])
            ]
        k += count
    return out


def _support_column(bc: BatchContext, value) -> Column:  # noqa: ANN001 - (list[SentenceScore]) -> Score
    col = Column(bc.n)
    for row, got in enumerate(_support(bc)):
        if got is None:
            col.defer(np.array([row]))
        elif isinstance(got, str):
            col.undefined(np.array([row]), got)
        else:
            col.score(row, value(got))
    return col


@columnar_form("answer_hallucination")
def _answer_hallucination(bc: BatchContext) -> Column:
    key = _texts(bc).encoder.embedder.key
    return _support_column(
        bc, lambda scored: Score.ok(float(np.mean([s.flagged for s in scored])), model=key, detail=tuple(scored))
    )


@columnar_form("answer_hallucination_score")
def _answer_hallucination_score(bc: BatchContext) -> Column:
    key = _texts(bc).encoder.embedder.key
    return _support_column(bc, lambda scored: Score.ok(max(s.value for s in scored), model=key))
