"""Anchor matching (METRICS.md §1, seed 001): a retrieved chunk matches a gold support by rel_path
and a heading-path segment prefix, optionally also by a snippet of its text."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

# 2: snippets are Unicode-normalised (NFC) before matching. 3: the rule is applied once: a model's dump read
# back (staged batches, the spool, the lake) is not normalised again; the CLI's scoring used to normalise
# staged anchors twice, which changes "./ a.md" and a lone segment holding "/" or "#" (raglake.schemas.CANONICAL).
# Part of every scoring's cache key, so that no batch scored under 2 is reused.
ANCHOR_RULE_VERSION = "3"
_WS = re.compile(r"\s+")


def heading_segments(path: str | Sequence[str] | None) -> tuple[str, ...]:
    """Split a heading path into normalised segments.

    Split on '>' (on '/' and '#' only when there is no '>'), strip each segment, collapse inner
    whitespace, drop empty segments. A list is joined with ' > ' first, so both spellings agree.
    """
    if path is None:
        return ()
    if isinstance(path, str):
        text = path
    else:
        try:
            text = " > ".join(path)
        except TypeError:  # a heading that is not text (a number): written as str() writes it
            text = " > ".join(str(p) for p in path)
    return _split_heading(text) if len(text) <= _CACHED_LENGTH else _split_heading_uncached(text)


def _split_heading_uncached(text: str) -> tuple[str, ...]:
    parts = text.split(">") if ">" in text else re.split(r"[/#]", text)
    return tuple(seg for seg in (_WS.sub(" ", p).strip() for p in parts) if seg)


# A pure function of a string, called for every heading of every record a file holds (2 of every 5 seconds
# of validating a capture file, record by record): memoised, since a corpus's headings recur across cases.
_CACHED_LENGTH = 1024
_split_heading = lru_cache(maxsize=1 << 16)(_split_heading_uncached)


def heading_string(segments: Sequence[str]) -> str:
    return " > ".join(segments)


def normalise_rel_path(path: str | None) -> str:
    """Backslashes become '/', one or more leading './' are dropped."""
    if type(path) is str and len(path) <= _CACHED_LENGTH:
        return _rel_path(path)
    return _rel_path_uncached(path)


def _rel_path_uncached(path: str | None) -> str:
    p = (path or "").strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


_rel_path = lru_cache(maxsize=1 << 16)(_rel_path_uncached)  # called for every path of every record, as above


def fold_text(text: str) -> str:
    """Whitespace-folded, case-insensitive, NFC-normalised form used for snippet matching.

    NFC before and after case folding (folding may decompose), so a precomposed 'é' and 'e' + U+0301
    agree; NFC rather than NFKC keeps compatibility characters such as '²' distinct from '2'."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text or "").casefold())
    return _WS.sub(" ", folded).strip()


def segments_start_with(chunk: Sequence[str], support: Sequence[str]) -> bool:
    return len(chunk) >= len(support) and tuple(chunk[: len(support)]) == tuple(support)


def anchor_matches(
    chunk_rel_path: str,
    chunk_segments: Sequence[str],
    support_rel_path: str,
    support_segments: Sequence[str],
    *,
    chunk_text: str | None = None,
    snippets: Iterable[str] = (),
    require_snippets: bool = False,
) -> bool:
    """True when the chunk lies at or under the support's anchor (and holds a snippet if asked)."""
    if chunk_rel_path != support_rel_path or not segments_start_with(chunk_segments, support_segments):
        return False
    snippets = [s for s in snippets if s and s.strip()]
    if require_snippets and snippets:
        folded = fold_text(chunk_text or "")
        return any(fold_text(s) in folded for s in snippets)
    return True


def path_under_folder(rel_path: str, folder: str) -> bool:
    """'work/projects/a.md' lies under 'work/projects' and 'work', not under 'work/proj'."""
    folder = normalise_rel_path(folder).strip("/")
    if not folder:
        return True
    return rel_path == folder or rel_path.startswith(folder + "/")
