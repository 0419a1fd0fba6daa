"""The texts a run's embedding metrics need, gathered once, and the table of their vectors that
every embedding metric reads (METRICS.md §4: each distinct text is encoded once per run)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from raglake.embed.cache import TextEncoder, text_key
from raglake.schemas import Capture, GoldenCase
from raglake.text.sentences import split_sentences


def answer_sentences(answer: str) -> list[str]:
    return split_sentences(answer)


def case_texts(case: GoldenCase, capture: Capture, k: int) -> list[str]:
    """Question, answer, reference answer, top-K chunk texts and answer sentences of one case."""
    if capture.failed:
        return []
    texts = [case.question]
    if capture.answer.strip():
        texts.append(capture.answer)
        texts.extend(answer_sentences(capture.answer))
    if (case.reference_answer or "").strip():
        texts.append(case.reference_answer)
    texts.extend(c.text for c in capture.top_k(k) if c.text.strip())
    return texts


def collect_texts(pairs: Iterable[tuple[GoldenCase, Capture]], k: int) -> list[str]:
    """Every distinct text of a set of cases, in first-seen order."""
    seen: dict[str, str] = {}
    for case, capture in pairs:
        for text in case_texts(case, capture, k):
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

    def vec(self, text: str) -> np.ndarray:
        try:
            return self.matrix[self.rows[text_key(text)]]
        except KeyError:
            raise KeyError(f"text not in the run's vector table (collect_texts missed it): {text[:60]!r}") from None

    def many(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.matrix.shape[1]), dtype=np.float32)
        return self.matrix[[self.rows[text_key(t)] for t in texts]]

    def subset(self, texts: Iterable[str]) -> VectorTable:
        """Only the rows these texts need (what one scoring batch carries)."""
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        return VectorTable(
            self.embedder_key,
            {k: i for i, k in enumerate(keys)},
            self.matrix[[self.rows[k] for k in keys]] if keys else self.matrix[:0],
        )
