"""Deterministic label rules (METRICS.md §3 'rule sources', seed 004's uncertainty phrases):
citation presence, fabricated sources, the observed action and 'don't know' answers."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
    return _cited(answer, (r.rel_path for r in references))


def _cited(answer: str, reference_paths: Iterable[str]) -> tuple[set[str], set[str]]:
    paths = {p for p in reference_paths if p}
    paths |= {m.group(0).lstrip("./") for m in _REL_PATH.finditer(answer or "")}
    wiki = {m.group(1).split("|")[0].strip().lower() for m in _WIKI_LINK.finditer(answer or "")}
    return paths, wiki


def fabricated_sources(
    answer: str, references: Iterable[Reference], retrieved: Iterable[RetrievedChunk], known_docs: Iterable[str] = ()
) -> list[str]:
    """Cited sources that match no retrieved chunk and no document of the index manifest (f = 1 when any).

    A rel_path matches a document of the same path (an answer may name it relative to any folder, so a
    suffix at a '/' boundary counts); a [[wiki link]] matches a document whose file stem is the link."""
    paths, wiki = cited_sources(answer, references)
    if not paths and not wiki:
        return []
    return _missing(paths, wiki, {c.rel_path for c in retrieved if c.rel_path} | set(known_docs))


def _missing(paths: set[str], wiki: set[str], known: set[str]) -> list[str]:
    missing = [p for p in paths if not any(k == p or k.endswith("/" + p) for k in known)]
    if wiki:
        stems = {p.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower() for p in known}
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


# ---- the same rules over a batch's arrays (raglake.metrics.columnar) ------------------------------------------
# Each is exact: a cheap Arrow test settles a row only where it provably agrees with the function above
# (Arrow's lowercasing is Unicode's simple mapping, Python's the full one: they differ only on 'İ', which
# lowercases to two characters in Python; re's IGNORECASE also equates 'ı', 'ſ' and 'K' with ASCII letters);
# the other rows go through the function itself.

_PY_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())
_PHRASES = "|".join(re.escape(p) for p in UNCERTAINTY_PHRASES)
_SHORT = "|".join(re.escape(p) for p in _SHORT_NON_ANSWERS)
_FOLDS_TO_ASCII = "[\\x{130}\\x{131}\\x{17f}\\x{212a}]"
_MAYBE_PATH = r"(?i:\.(?:md|markdown|txt|pdf|rst|htm))|" + _FOLDS_TO_ASCII
_MAYBE_CLARIFY = "mean|clarify|specify|which|asking about|" + _FOLDS_TO_ASCII


def _mask(arr: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(arr, False), dtype=bool)


def _python(answers: pa.Array, rows: np.ndarray, fn) -> np.ndarray:
    """fn(answer) for the rows given, called once per distinct answer."""
    sub = answers.take(pa.array(rows, type=pa.int64()))
    distinct = pc.unique(sub)
    found = np.asarray([fn(t) for t in distinct.to_pylist()], dtype=bool)
    return found[np.asarray(pc.index_in(sub, value_set=distinct), dtype=np.int64)]


def dont_know_array(answers: pa.Array) -> np.ndarray:
    """is_dont_know for every answer."""
    text = pc.utf8_trim(pc.utf8_lower(pc.replace_substring(answers, "\u2019", "'")), characters=_PY_SPACE)
    out = _mask(pc.match_substring_regex(text, _PHRASES))
    out |= (np.asarray(pc.utf8_length(text)) < 10) & _mask(pc.match_substring_regex(text, _SHORT))
    rows = np.flatnonzero(_mask(pc.match_substring(answers, "\u0130")))
    if len(rows):
        out[rows] = _python(answers, rows, is_dont_know)
    return out


def abstained_array(explicit: pa.Array, answers: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(did the target abstain, known from the explicit field) for every capture: rules.abstained."""
    given = _mask(pc.is_valid(explicit))
    return np.where(given, _mask(explicit), dont_know_array(answers)), given


def cited_array(answers: pa.Array, n_references: np.ndarray) -> np.ndarray:
    """has_citation for every answer (n_references: how many references each capture lists); a citation
    marker needs a '[' and a path a '.md'-like ending."""
    out = n_references > 0
    maybe = _mask(pc.match_substring(answers, "[")) | _mask(pc.match_substring_regex(answers, _MAYBE_PATH))
    rows = np.flatnonzero(~out & maybe)
    if len(rows):
        out[rows] = _python(answers, rows, lambda t: has_citation(t, ()))
    return out


def observed_action_array(abstained: np.ndarray, answers: pa.Array, blank: np.ndarray) -> np.ndarray:
    """observed_action for every capture, as an object array of 'refuse', 'none', 'clarify' or 'answer'."""
    maybe = _mask(pc.match_substring_regex(pc.utf8_lower(answers), _MAYBE_CLARIFY))
    clarify = np.zeros(len(answers), dtype=bool)
    rows = np.flatnonzero(~abstained & ~blank & maybe)
    if len(rows):
        clarify[rows] = _python(answers, rows, lambda t: bool(_CLARIFY.search(t)))
    out = np.full(len(answers), "answer", dtype=object)
    out[clarify] = "clarify"
    out[blank] = "none"
    out[abstained] = "refuse"
    return out


def maybe_cites_in_text(answers: pa.Array) -> np.ndarray:
    """Answers whose text may cite a source (a path or a [[wiki link]]): the others cite only their references."""
    return _mask(pc.match_substring(answers, "[[")) | _mask(pc.match_substring_regex(answers, _MAYBE_PATH))


def _suffixes(path: str) -> list[str]:
    """The path and each of its tails after a '/': p matches k (k == p or k ends with '/' + p) iff p is one."""
    return [path] + [path[i + 1 :] for i, ch in enumerate(path) if ch == "/"]


def fabricated_rows(
    answers: Sequence[str], references: Sequence[Sequence[str]], retrieved: Sequence[Sequence[str]], known_docs
) -> list[bool]:
    """bool(fabricated_sources(...)) for rows given as plain values (rel_paths of references and chunks),
    each path's tails worked out once."""
    known_docs = set(known_docs)
    known_tails = {t for d in known_docs for t in _suffixes(d)}
    tails: dict[str, frozenset[str]] = {}
    in_text: dict[str, tuple[set[str], set[str]]] = {}  # what each distinct answer cites in its text
    out = []
    for answer, refs, chunks in zip(answers, references, retrieved):
        if answer not in in_text:
            in_text[answer] = _cited(answer, ())
        paths, wiki = in_text[answer]
        paths = paths | {p for p in refs if p}
        if wiki:  # rare: the plain rule
            out.append(bool(_missing(paths, wiki, {c for c in chunks if c} | known_docs)))
            continue
        for c in chunks:
            if c not in tails:
                tails[c] = frozenset(_suffixes(c)) if c else frozenset()
        out.append(any(p not in known_tails and not any(p in tails[c] for c in chunks) for p in paths))
    return out
