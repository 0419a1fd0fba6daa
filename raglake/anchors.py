"""Anchor matching (METRICS.md §1, seed 001): a retrieved chunk matches a gold support by rel_path
and a heading-path segment prefix, optionally also by a snippet of its text."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

ANCHOR_RULE_VERSION = "2"  # 2: snippets are Unicode-normalised (NFC) before matching
_WS = re.compile(r"\s+")


def heading_segments(path: str | Sequence[str] | None) -> tuple[str, ...]:
    """Split a heading path into normalised segments.

    Split on '>' (on '/' and '#' only when there is no '>'), strip each segment, collapse inner
    whitespace, drop empty segments. A list is joined with ' > ' first, so both spellings agree.
    """
    if path is None:
        return ()
    text = path if isinstance(path, str) else " > ".join(str(p) for p in path)
    parts = text.split(">") if ">" in text else re.split(r"[/#]", text)
    return tuple(seg for seg in (_WS.sub(" ", p).strip() for p in parts) if seg)


def heading_string(segments: Sequence[str]) -> str:
    return " > ".join(segments)


def normalise_rel_path(path: str | None) -> str:
    """Backslashes become '/', one or more leading './' are dropped."""
    p = (path or "").strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


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
