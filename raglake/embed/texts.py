"""The texts a run's embedding metrics read, gathered once, and the table of their vectors that
every embedding metric reads (METRICS.md §4: each distinct text is encoded once per run).

Each metric declares the kinds of text whose vectors it reads (`texts=` at registration, names from
TEXT_KINDS); a run collects the union over the metrics it computes, and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from raglake.embed.cache import TextEncoder, text_key
from raglake.schemas import Capture, GoldenCase
from raglake.text.sentences import split_sentences


def answer_sentences(answer: str) -> list[str]:
    return split_sentences(answer)


def top_k_contexts(capture: Capture, k: int) -> list[str]:
    """The non-blank texts of ranks 1..K."""
    return [c.text for c in capture.top_k(k) if c.text.strip()]


def _answer(capture: Capture) -> list[str]:
    return [capture.answer] if capture.answer.strip() else []


def _reference(case: GoldenCase) -> list[str]:
    return [case.reference_answer] if (case.reference_answer or "").strip() else []


# kind of text -> its texts in one (case, capture) at cut-off k; the order is the order texts are collected in
TEXT_KINDS: dict[str, Callable[[GoldenCase, Capture, int], list[str]]] = {
    "question": lambda case, capture, k: [case.question],
    "answer": lambda case, capture, k: _answer(capture),
    "answer_sentences": lambda case, capture, k: answer_sentences(capture.answer) if _answer(capture) else [],
    "reference_answer": lambda case, capture, k: _reference(case),
    "top_k_contexts": lambda case, capture, k: top_k_contexts(capture, k),
    "context_sentences": lambda case, capture, k: [s for t in top_k_contexts(capture, k) for s in split_sentences(t)],
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
    return [text for kind in kinds for text in TEXT_KINDS[kind](case, capture, k)]


def collect_texts(pairs: Iterable[tuple[GoldenCase, Capture]], k: int, metrics: Iterable[ReadsTexts]) -> list[str]:
    """Every distinct text the given metrics read in a set of cases, in first-seen order."""
    kinds = text_kinds(metrics)
    seen: dict[str, str] = {}
    if not kinds:
        return []
    for case, capture in pairs:
        for text in case_texts(case, capture, k, kinds):
            seen.setdefault(text_key(text), text)
    return list(seen.values())


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

    def subset(self, texts: Iterable[str]) -> VectorTable:
        """Only the rows these texts need (what one scoring batch carries)."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        return VectorTable(
            self.embedder_key,
            {k: i for i, k in enumerate(keys)},
            self.matrix[[self.rows[k] for k in keys]] if keys else self.matrix[:0],
        )
