"""Anchor matching (raglake.anchors, METRICS.md §1) over arrays: every (left, right) pair of one case
whose left anchor lies at or under the right one: same rel_path, and the right heading's segments a
prefix of the left's. On normal heading strings ("A > B", segments free of '>') that is string
equality or a prefix ending at a " > " separator, compared here byte by byte in numpy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.anchors import fold_text

_SEP = np.frombuffer(b" > ", dtype=np.uint8)


def codes(*arrays: pa.Array) -> list[np.ndarray]:
    """One integer code per distinct string across all the arrays (equal strings, equal codes)."""
    joined = pa.concat_arrays([a.cast(pa.string()) for a in arrays]) if arrays else pa.array([], pa.string())
    all_codes = np.asarray(pc.dictionary_encode(joined).indices, dtype=np.int64)
    out, at = [], 0
    for a in arrays:
        out.append(all_codes[at : at + len(a)])
        at += len(a)
    return out


def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string array without nulls."""
    arr = arr.cast(pa.string())
    _, offsets, data = arr.buffers()
    off = np.frombuffer(offsets, dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    return off, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8))


def _equal_spans(da: np.ndarray, a: np.ndarray, db: np.ndarray, b: np.ndarray, length: np.ndarray) -> np.ndarray:
    """For each i: da[a[i]:a[i]+length[i]] == db[b[i]:b[i]+length[i]]."""
    total = int(length.sum())
    if total == 0:
        return np.ones(len(length), dtype=bool)
    row = np.repeat(np.arange(len(length)), length)
    within = np.arange(total) - np.repeat(np.cumsum(length) - length, length)
    differ = da[a[row] + within] != db[b[row] + within]
    return np.bincount(row[differ], minlength=len(length)) == 0


def segment_prefix(long: pa.Array, li: np.ndarray, short: pa.Array, si: np.ndarray) -> np.ndarray:
    """For each pair: are the segments of heading short[si] a prefix of those of long[li]?"""
    lo, ld = string_buffers(long)
    so, sd = string_buffers(short)
    la, ll = lo[li], lo[li + 1] - lo[li]
    sa, sl = so[si], so[si + 1] - so[si]
    fits = (ll == sl) | (ll >= sl + 3)
    out = np.zeros(len(li), dtype=bool)
    cand = np.flatnonzero(fits & (sl > 0))
    same = _equal_spans(ld, la[cand], sd, sa[cand], sl[cand])
    deeper = ll[cand] > sl[cand]
    sep = np.ones(len(cand), dtype=bool)
    if deeper.any():
        d = cand[deeper]
        sep[deeper] = _equal_spans(ld, la[d] + sl[d], _SEP, np.zeros(len(d), np.int64), np.full(len(d), 3))
    out[cand] = same & sep
    out[sl == 0] = True
    return out


def same_key_pairs(left_key: np.ndarray, right_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every (i, j) with left_key[i] == right_key[j], by i then j."""
    order = np.argsort(right_key, kind="stable")
    rk = right_key[order]
    lo = np.searchsorted(rk, left_key, "left")
    n = np.searchsorted(rk, left_key, "right") - lo
    li = np.repeat(np.arange(len(left_key)), n)
    within = np.arange(len(li)) - np.repeat(np.cumsum(n) - n, n)
    return li, order[np.repeat(lo, n) + within]


def anchor_pairs(
    left_case: np.ndarray,
    left_path: np.ndarray,
    left_heading: pa.Array,
    right_case: np.ndarray,
    right_path: np.ndarray,
    right_heading: pa.Array,
) -> tuple[np.ndarray, np.ndarray]:
    """(left index, right index) of every pair of one case where the left anchor lies at or under the
    right one; paths as codes() of one call; sorted by left, then right."""
    width = int(max(left_path.max(initial=0), right_path.max(initial=0))) + 1
    li, ri = same_key_pairs(left_case * width + left_path, right_case * width + right_path)
    keep = segment_prefix(left_heading, li, right_heading, ri)
    return li[keep], ri[keep]


def snippets_found(texts: Sequence[str], snippets: Sequence[Sequence[str]]) -> np.ndarray:
    """For each (chunk text, support snippets) pair: True when the support has no non-blank snippet or
    one of them, folded (raglake.anchors.fold_text), lies in the folded text."""
    folded_text: dict[str, str] = {}
    folded_snippet: dict[str, str] = {}
    out = np.ones(len(texts), dtype=bool)
    for i, (text, snips) in enumerate(zip(texts, snippets)):
        snips = [s for s in snips if s and s.strip()]
        if not snips:
            continue
        if text not in folded_text:
            folded_text[text] = fold_text(text)
        body = folded_text[text]
        found = False
        for s in snips:
            if s not in folded_snippet:
                folded_snippet[s] = fold_text(s)
            if folded_snippet[s] in body:
                found = True
                break
        out[i] = found
    return out
