"""A sentence splitter for answers and notes: abbreviations, initials, decimals, ellipses, markdown
bullets, numbered lists, headings and code fences are handled; no model, no download."""

from __future__ import annotations

import re
from functools import lru_cache

SPLITTER_VERSION = "1"

ABBREVIATIONS = frozenset(
    """
mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx ca no nos fig figs vol vols p pp ed eds
inc ltd co corp dept univ jan feb mar apr jun jul aug sep sept oct nov dec mon tue wed thu fri sat sun
a.m p.m u.s u.k e.u min max est avg incl excl resp
""".split()
)

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|[a-z][.)])\s+")  # lowercase letters only: "J. R. R." is initials
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
# a boundary: terminal punctuation (with closing quotes/brackets and citation markers such as "[1]" or
# "[2, 3]" that belong to the sentence they end), whitespace, then a sentence start
_BOUNDARY = re.compile(r"([.!?…]+[\"'”’)\]]*(?:\s*\[\d+(?:\s*,\s*\d+)*\])*)(\s+)(?=[\"'“‘(]?[A-Z0-9À-Ý]|\[(?!\d))")
_CITED_END = re.compile(r"([.!?…]+[\"'”’)\]]*)(\s*\[\d+(?:\s*,\s*\d+)*\])(?=[A-Z])")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")


def _is_abbreviation(text_before: str) -> bool:
    """Does the text end (before its final '.') with an abbreviation or an initial?"""
    m = _WORD_BEFORE.search(text_before)
    if not m:
        return False
    word = m.group(1).rstrip(".").lower()
    if word in ABBREVIATIONS:
        return True
    return len(word) == 1 and m.group(1)[0].isupper()  # an initial: "J. R. R. Tolkien"


def split_paragraph(text: str) -> list[str]:
    text = _CITED_END.sub(r"\1\2 ", text)  # "cited.[1]Then" -> "cited.[1] Then"
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        punct = re.match(r"[.!?…]+", m.group(1)).group(0)
        end = m.end(1)
        if punct == "." and _is_abbreviation(text[start : m.start(1)]):
            continue
        piece = text[start:end].strip()
        if piece:
            sentences.append(piece)
        start = m.end(2)
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def split_sentences(text: str) -> list[str]:
    """Sentences of a text: each list item and heading on its own, prose split at sentence ends,
    code fences kept whole. Memoised (a run splits the same retrieved chunks for many cases)."""
    return list(_split_sentences(text or ""))


@lru_cache(maxsize=4096)  # bounded (~35 MB with 4 KB chunks): popular chunks stay, one-off answers pass
def _split_sentences(text: str) -> tuple[str, ...]:
    out: list[str] = []
    paragraph: list[str] = []
    fence: list[str] | None = None

    def flush() -> None:
        if paragraph:
            out.extend(split_paragraph(" ".join(paragraph)))
            paragraph.clear()

    for line in text.splitlines():
        if fence is not None:
            fence.append(line)
            if _FENCE.match(line):
                out.append("\n".join(fence).strip())
                fence = None
            continue
        if _FENCE.match(line):
            flush()
            fence = [line]
            continue
        stripped = line.strip()
        if not stripped:
            flush()
        elif _HEADING.match(line):
            flush()
            out.append(_HEADING.sub("", line).strip())
        elif _BULLET.match(line):
            flush()
            out.extend(split_paragraph(_BULLET.sub("", line).strip()))
        else:
            paragraph.append(stripped)
    flush()
    if fence:
        out.append("\n".join(fence).strip())
    return tuple(s for s in out if s)


def clear_memo() -> None:
    """Forget the memoised splits (benchmarks time a fresh run)."""
    _split_sentences.cache_clear()
