"""Content words of a text for lexical support checks: lower-cased word tokens, English stop words and
citation markers ("[1]", "[2, 3]") left out, each cut to a crude stem (common suffixes stripped), so
"pumps"/"pumped"/"pumping" meet. No model, no download; deterministic."""

from __future__ import annotations

import re
from functools import lru_cache

WORDS_VERSION = "1"

STOP_WORDS = frozenset(
    """
a about above after again against all almost along also although always am among an and another any anyone
anything are around as at be became because become becomes been before being below between both but by can
cannot could did do does doing done down during each either else enough etc even ever every few for from
further get gets getting got had has have having he her here hers herself him himself his how however i if
in into is it its itself just least less let like made make makes many may me might more most much must my
myself neither no nor not now of off often on once one only or other others otherwise our ours ourselves out
over own per perhaps quite rather really said same say says several shall she should since so some something
sometimes still such than that the their theirs them themselves then there therefore these they this those
though through thus to too under until up upon us very was we well were what whatever when where whether
which while who whom whose why will with within without would yet you your yours yourself yourselves
s t d ll m re ve don doesn didn isn aren wasn weren won wouldn couldn shouldn can't it's
""".split()
)

_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "ed", "es", "ly", "s")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The word without its first matching common suffix, keeping at least 3 letters ("pumping" -> "pump")."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> list[str]:
    """The stems of the text's words that are not stop words, in order (repeats kept). Memoised."""
    return list(_content_words(text or ""))


@lru_cache(maxsize=4096)
def _content_words(text: str) -> tuple[str, ...]:
    tokens = _TOKEN.findall(_CITATION.sub(" ", text).lower())
    return tuple(stem(t) for t in tokens if t not in STOP_WORDS)


def coverage(sentence_words: list[str], context_words: set[str]) -> float | None:
    """Share of a sentence's content words found among the contexts' content words; None when it has none."""
    if not sentence_words:
        return None
    return sum(w in context_words for w in sentence_words) / len(sentence_words)


def clear_memo() -> None:
    """Forget the memoised stems and content words (benchmarks time a fresh run)."""
    _content_words.cache_clear()
    stem.cache_clear()
