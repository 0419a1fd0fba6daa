"""Deterministic label rules (METRICS.md §3 'rule sources', seed 004's uncertainty phrases):
citation presence, fabricated sources, the observed action and 'don't know' answers."""

from __future__ import annotations

import re
from collections.abc import Iterable

from raglake.schemas import Capture, Reference, RetrievedChunk

RULES_VERSION = "1"

# [1], [12, 3], [Source 12], [source: 4], [[note]], [[note|alias]]
_CITATION_MARKER = re.compile(r"\[\[[^\]\n]+\]\]|\[(?:source|src|doc|ref)?\s*:?\s*\d+(?:\s*,\s*\d+)*\]", re.IGNORECASE)
_WIKI_LINK = re.compile(r"\[\[([^\]\n]+)\]\]")
_REL_PATH = re.compile(r"(?<![\w/])[\w.\-]+(?:/[\w.\-]+)*\.(?:md|markdown|txt|pdf|rst|html?)\b", re.IGNORECASE)

# seed 004, "Don't Know Answers Count": the phrase list, plus the refusals a RAG system gives
UNCERTAINTY_PHRASES = (
    "i don't know",
    "i do not know",
    "unknown",
    "not sure",
    "cannot determine",
    "no information",
    "insufficient data",
    "unable to answer",
    "cannot answer",
    "don't have enough information",
    "not available",
    "no data",
    "could not find",
    "couldn't find",
    "can't find",
    "cannot find",
    "not in the notes",
    "notes do not",
    "notes don't",
    "no mention",
)
_SHORT_NON_ANSWERS = ("unknown", "n/a", "none", "null")
_CLARIFY = re.compile(
    r"\b(do you mean|did you mean|could you (?:clarify|specify)|can you (?:clarify|specify)|which (?:one|of)\b[^?]*\?"
    r"|are you asking about|please (?:clarify|specify))",
    re.IGNORECASE,
)


def has_citation(answer: str, references: Iterable[Reference]) -> bool:
    """z = 1: a citation marker ([1], [Source 12], [[note]], a rel_path) or a non-empty references list."""
    if any(True for _ in references):
        return True
    text = answer or ""
    return bool(_CITATION_MARKER.search(text) or _REL_PATH.search(text))


def cited_sources(answer: str, references: Iterable[Reference]) -> tuple[set[str], set[str]]:
    """(rel_paths, wiki-link names) the answer cites: its references plus those written in its text."""
    paths = {r.rel_path for r in references if r.rel_path}
    paths |= {m.group(0).lstrip("./") for m in _REL_PATH.finditer(answer or "")}
    wiki = {m.group(1).split("|")[0].strip().lower() for m in _WIKI_LINK.finditer(answer or "")}
    return paths, wiki


def fabricated_sources(
    answer: str, references: Iterable[Reference], retrieved: Iterable[RetrievedChunk], known_docs: Iterable[str] = ()
) -> list[str]:
    """Cited sources that match no retrieved chunk and no document of the index manifest (f = 1 when any).

    A rel_path matches a document of the same path (an answer may name it relative to any folder, so a
    suffix at a '/' boundary counts); a [[wiki link]] matches a document whose file stem is the link."""
    known = {c.rel_path for c in retrieved if c.rel_path} | set(known_docs)
    stems = {p.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower() for p in known}
    paths, wiki = cited_sources(answer, references)
    missing = [p for p in paths if not any(k == p or k.endswith("/" + p) for k in known)]
    missing += [f"[[{w}]]" for w in wiki if w not in stems]
    return sorted(missing)


def is_dont_know(answer: str) -> bool:
    """Seed 004: an uncertainty phrase anywhere, or a very short non-answer."""
    text = (answer or "").lower().strip().replace("\u2019", "'")
    if any(p in text for p in UNCERTAINTY_PHRASES):
        return True
    return len(text) < 10 and any(w in text for w in _SHORT_NON_ANSWERS)


def abstained(capture: Capture) -> tuple[bool, str]:
    """(did the target abstain, how we know): the explicit field first, the phrase list last."""
    if capture.abstained is not None:
        return capture.abstained, "abstained_field"
    return is_dont_know(capture.answer), "uncertainty_phrases"


def observed_action(capture: Capture) -> str:
    """refuse (abstained), clarify (asks the user back), none (empty answer) or answer."""
    if abstained(capture)[0]:
        return "refuse"
    if not capture.answer.strip():
        return "none"
    if _CLARIFY.search(capture.answer):
        return "clarify"
    return "answer"
