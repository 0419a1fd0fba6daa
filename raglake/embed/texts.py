"""The texts a run's embedding metrics read, gathered once, and the table of their vectors that
every embedding metric reads (METRICS.md §4: each distinct text is encoded once per run).

Each metric declares the kinds of text whose vectors it reads (`texts=` at registration, names from
TEXT_KINDS); a run collects the union over the metrics it computes, and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.cache import TextEncoder, text_key
from raglake.embed.cosine import grid, pair_cosines
from raglake.schemas import FAILED_STATUSES, Capture, GoldenCase
from raglake.text.sentences import split_sentences


def answer_sentences(answer: str) -> list[str]:
    return split_sentences(answer)


def top_k_contexts(capture: Capture, k: int) -> list[str]:
    """The non-blank texts of ranks 1..K."""
    return [c.text for c in capture.top_k(k) if c.text.strip()]


@dataclass(frozen=True)
class CaseTexts:
    """The texts of one case that the kinds of text are drawn from: built from its models, or from a
    batch's columns without building any (collect_batch_texts)."""

    question: str
    answer: str
    reference_answer: str | None
    contexts: list[str]  # the non-blank texts of ranks 1..K

    @classmethod
    def of(cls, case: GoldenCase, capture: Capture, k: int) -> CaseTexts:
        return cls(case.question, capture.answer, case.reference_answer, top_k_contexts(capture, k))


def _answer(texts: CaseTexts) -> list[str]:
    return [texts.answer] if texts.answer.strip() else []


def _reference(texts: CaseTexts) -> list[str]:
    return [texts.reference_answer] if (texts.reference_answer or "").strip() else []


# kind of text -> its texts in one case at cut-off k; the order is the order texts are collected in
TEXT_KINDS: dict[str, Callable[[CaseTexts], list[str]]] = {
    "question": lambda t: [t.question],
    "answer": _answer,
    "answer_sentences": lambda t: answer_sentences(t.answer) if _answer(t) else [],
    "reference_answer": _reference,
    "top_k_contexts": lambda t: t.contexts,
    "context_sentences": lambda t: [s for c in t.contexts for s in split_sentences(c)],
}


class ReadsTexts(Protocol):
    """A metric as far as the embedding stage cares (raglake.metrics.registry.Metric)."""

    texts: tuple[str, ...]


def text_kinds(metrics: Iterable[ReadsTexts]) -> tuple[str, ...]:
    """The kinds of text some of these metrics read, in TEXT_KINDS order."""
    wanted = {kind for m in metrics for kind in m.texts}
    return tuple(kind for kind in TEXT_KINDS if kind in wanted)


def case_texts(case: GoldenCase, capture: Capture, k: int, kinds: Sequence[str] = tuple(TEXT_KINDS)) -> list[str]:
    """The texts of these kinds in one case (none for a failed capture), blank texts left out."""
    if capture.failed:
        return []
    texts = CaseTexts.of(case, capture, k)
    return [text for kind in kinds for text in TEXT_KINDS[kind](texts)]


def _distinct(cases: Iterable[CaseTexts | None], kinds: Sequence[str]) -> list[str]:
    """Every distinct text of these kinds, in first-seen order (None: a failed capture, no texts); by the string
    itself (its hash is kept on the object), not text_key's sha256: equal texts have equal keys."""
    seen: dict[str, None] = {}
    for texts in cases:
        if texts is not None:
            for kind in kinds:
                seen.update(dict.fromkeys(TEXT_KINDS[kind](texts)))
    return list(seen)


def collect_texts(pairs: Iterable[tuple[GoldenCase, Capture]], k: int, metrics: Iterable[ReadsTexts]) -> list[str]:
    """Every distinct text the given metrics read in a set of cases, in first-seen order."""
    kinds = text_kinds(metrics)
    if not kinds:
        return []
    return _distinct((None if x.failed else CaseTexts.of(c, x, k) for c, x in pairs), kinds)


def batch_case_texts(batch: ColumnarBatch, k: int) -> Iterator[CaseTexts | None]:
    """CaseTexts.of every row of a columnar batch, read from its columns (None for a failed capture)."""
    cases, captures = batch.golden.cases, batch.captures.captures
    failed = [status in FAILED_STATUSES for status in captures.column("status").to_pylist()]
    chunks = batch.captures.chunks  # by capture, then rank: Capture.top_k's order
    contexts: list[list[str]] = [[] for _ in range(len(batch))]
    ranks = chunks.column("rank").to_pylist() if len(chunks) else []
    texts = chunks.column("text").to_pylist() if len(chunks) else []
    for parent, rank, text in zip(chunks.parent.tolist(), ranks, texts):
        if rank <= k and text and text.strip():
            contexts[parent].append(text)
    rows = zip(
        cases.column("question").to_pylist(),
        captures.column("answer").to_pylist(),
        cases.column("reference_answer").to_pylist(),
        contexts,
        failed,
    )
    for question, answer, reference, context, bad in rows:
        yield None if bad else CaseTexts(question, answer or "", reference, context)


def collect_batch_texts(batches: Iterable[ColumnarBatch], k: int, metrics: Iterable[ReadsTexts]) -> list[str]:
    """collect_texts over columnar batches (the same texts in the same order; no model is built)."""
    kinds = text_kinds(metrics)
    if not kinds:
        return []
    return _distinct((texts for batch in batches for texts in batch_case_texts(batch, k)), kinds)


@dataclass
class VectorTable:
    """Vectors by text, as encoded by one embedder (its key travels with the table)."""

    embedder_key: str
    rows: dict[str, int]  # text key -> row of `matrix`
    matrix: np.ndarray  # (n, dim) float32, L2-normalised

    @classmethod
    def encode(cls, encoder: TextEncoder, texts: Sequence[str], caller: str = "metrics") -> VectorTable:
        distinct = list(dict.fromkeys(texts))
        matrix = encoder.encode(distinct, caller=caller)
        return cls(encoder.embedder.key, {text_key(t): i for i, t in enumerate(distinct)}, matrix)

    def _row(self, text: str) -> int:
        try:
            return self.rows[text_key(text)]
        except KeyError:
            raise KeyError(
                "text not in the run's vector table (does the metric declare every kind of text it reads, "
                f"`texts=` in its registration?): {text[:60]!r}"
            ) from None

    def vec(self, text: str) -> np.ndarray:
        return self.matrix[self._row(text)]

    def many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        return self.matrix[[self._row(t) for t in texts]]

    def cosines(self, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
        """cos(left[i], right[i]) for every i (raglake.embed.cosine, the vector metrics' one routine)."""
        rows = [self._row(t) for t in [*left, *right]]
        return pair_cosines(self.matrix, rows[: len(left)], self.matrix, rows[len(left) :])

    def cosine_grid(self, left: Sequence[str], right: Sequence[str]) -> np.ndarray:
        """cos(left[i], right[j]) as a len(left) x len(right) array (the same routine)."""
        i, j = grid(len(left), len(right))
        return self.cosines([left[x] for x in i], [right[x] for x in j]).reshape(len(left), len(right))

    def subset(self, texts: Iterable[str]) -> VectorTable:
        """Only the rows these texts need (what one scoring batch carries)."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        return VectorTable(
            self.embedder_key,
            {k: i for i, k in enumerate(keys)},
            self.matrix[[self.rows[k] for k in keys]] if keys else self.matrix[:0],
        )
