"""Sentence support without an LLM (answer_hallucination since version 2; version 3 takes its cosines in
float64): how well the top-K chunks back each answer sentence, from the run's sentence vectors and the
words the sentence shares with the chunks.

    support(s) = clip((1 − α)·max_c cos(s, c) + α·coverage(s), 0, 1),    h(s) = 1 − support(s)

c ranges over the sentences of the top-K chunks (not whole chunks: a chunk's vector averages over
everything it says, so one supporting sentence inside a long chunk scores low); coverage(s) is the share
of the sentence's content words (raglake.text.words) found among the chunks' content words (a sentence
with none counts as covered). α = 0.3 and the default θh = 0.70 were chosen on the dev half of
LFQA-Verification (docs/metaeval.md): with them, sentence-level AUROC is 0.974 / 0.921 on the held-out
half of webgpt / alpaca_wdoc, against 0.965 / 0.881 for the plain max-cosine baseline (α = 0)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from raglake.metrics.registry import SentenceScore
from raglake.text.sentences import split_sentences
from raglake.text.words import content_words, coverage

LEXICAL_WEIGHT = 0.3  # α: the share of the support that comes from content-word coverage


@dataclass(frozen=True)
class ContextSentences:
    """The sentences of the top-K chunks, each with the rank of its chunk, and their content words."""

    sentences: list[str]
    ranks: list[int]
    words: set[str]

    @classmethod
    def of(cls, chunks: list[tuple[int, str]]) -> ContextSentences:
        """From (rank, text) of the non-blank top-K chunks."""
        sentences, ranks, words = [], [], set()
        for rank, text in chunks:
            for s in split_sentences(text):
                sentences.append(s)
                ranks.append(rank)
            words.update(content_words(text))
        return cls(sentences, ranks, words)


def sentence_support(
    answer_sentences: list[str], sims: np.ndarray, context: ContextSentences, theta: float
) -> list[SentenceScore]:
    """Per answer sentence: h(s) = 1 − support(s), flagged when support < θ, with its two parts; `sims`:
    the cosines of the answer sentences (rows) to the context sentences (columns)."""
    best = sims.argmax(axis=1) if sims.size else np.zeros(len(answer_sentences), dtype=np.intp)
    return [
        supported(i, sentence, float(sims[i, best[i]]), context.ranks[best[i]], context.words, theta)
        for i, sentence in enumerate(answer_sentences)
    ]


def supported(index: int, sentence: str, cos: float, rank: int, words: set[str], theta: float) -> SentenceScore:
    """One answer sentence's score from its best cosine to a context sentence and the context's content words
    (the per-case path and the columnar form share it)."""
    cov = coverage(content_words(sentence), words)
    support = min(1.0, max(0.0, (1 - LEXICAL_WEIGHT) * cos + LEXICAL_WEIGHT * (1.0 if cov is None else cov)))
    return SentenceScore(
        index=index,
        sentence=sentence,
        value=1.0 - support,
        flagged=support < theta,
        best_cos=cos,
        coverage=cov,
        best_rank=rank,
    )
