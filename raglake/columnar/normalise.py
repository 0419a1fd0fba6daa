"""Vectorised forms of the normalisations raglake's record models apply (raglake.schemas): each is
exact because a value the Arrow test does not prove already normal goes through the very Python
function the model uses, once per distinct value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.anchors import heading_segments, heading_string, normalise_rel_path

# every character Python's str.isspace(), str.strip() and re's \s treat as whitespace (none lies past U+3000;
# tests/test_columnar_read.py checks the whole range)
PY_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


def re2_class(chars: str, negate: bool = False) -> str:
    """An RE2 character class of exactly these characters."""
    return "[" + ("^" if negate else "") + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]"


_WS = re2_class(PY_SPACE)
_WORD = re2_class(PY_SPACE + ">", negate=True)
_WORD1 = re2_class(PY_SPACE + ">/#", negate=True)
# the fixed points of heading_string(heading_segments(s)): "" , one segment without '/' or '#' (it would be split
# there), or segments joined by " > "; a segment is words of non-space characters joined by single spaces
HEADING_FIXED = f"^(?:|{_WORD1}+(?: {_WORD1}+)*|{_WORD}+(?: {_WORD}+)*(?: > {_WORD}+(?: {_WORD}+)*)+)$"
_EDGE = re2_class(PY_SPACE + "\\", negate=True)
REL_PATH_FIXED = f"^(?:{_EDGE}(?:[^\\\\]*{_EDGE})?)?$"
BLANK = f"^{_WS}*$"


class BulkProblem(Exception):
    """The bulk reader cannot vouch for a file (a value it does not handle, or an invalid one); the
    per-record path reads it instead and names the file, line and field of any error."""


def mask(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array as numpy, null as False."""
    return np.asarray(pc.fill_null(arr, False), dtype=bool)


def map_unique(arr: pa.Array, todo: np.ndarray, fn: Callable[[Any], Any], out_type: pa.DataType) -> pa.Array:
    """`arr` with fn(value) in the rows of `todo` (fn called once per distinct value); a ValueError of fn is
    a BulkProblem."""
    if not todo.any():
        return arr if arr.type == out_type else arr.cast(out_type)
    rows = np.flatnonzero(todo)
    sub = arr.take(pa.array(rows))
    distinct = pc.unique(sub)
    try:
        mapped = pa.array([fn(v) for v in distinct.to_pylist()], type=out_type)
    except (ValueError, TypeError) as e:
        raise BulkProblem(str(e)) from None
    new = mapped.take(pc.index_in(sub, value_set=distinct))
    base = arr if arr.type == out_type else pc.if_else(pa.array(todo), pa.nulls(len(arr), out_type), arr.cast(out_type))
    return pc.replace_with_mask(base, pa.array(todo), new)


def _heading(value: str | None) -> str:
    return heading_string(heading_segments(value))


def by_distinct(arr: pa.Array, fn: Callable[[pa.Array], Any]) -> tuple[Any, np.ndarray | None]:
    """(fn of the distinct values, the index of each row's value there) where values repeat (most anchors'
    paths and headings do); (fn(arr), None) where they are mostly distinct."""
    encoded = pc.dictionary_encode(arr)
    if 2 * len(encoded.dictionary) > len(arr) or encoded.indices.null_count:
        return fn(arr), None
    return fn(encoded.dictionary), np.asarray(encoded.indices, dtype=np.int64)


def _spread(values: pa.Array, index: np.ndarray | None) -> pa.Array:
    return values if index is None else values.take(pa.array(index))


def _normal_headings(arr: pa.Array) -> pa.Array:
    return map_unique(arr, ~mask(pc.match_substring_regex(arr, HEADING_FIXED)), _heading, pa.string())


def headings_and_depth(arr: pa.Array, *, canonical: bool = False) -> tuple[pa.Array, np.ndarray]:
    """Heading paths as their normal string ("A > B": a list of segments is joined with " > " first, as the
    model does; null is ()) and how many segments each has; worked out once per distinct heading.
    `canonical`: a list is a model's segments already, joined as they are (normalising them again is not
    the same: the one segment "A/B" would be split at "/")."""
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        if canonical:
            depth = np.asarray(pc.fill_null(pc.list_value_length(arr), 0), dtype=np.int32)
            return pc.fill_null(pc.binary_join(arr, " > "), ""), depth
        arr = pc.binary_join(arr, " > ")
    arr = pc.fill_null(arr, "")
    (normal, depth), index = by_distinct(arr, lambda a: (h := _normal_headings(a), heading_depth(h)))
    return _spread(normal, index), depth if index is None else depth[index]


def headings(arr: pa.Array) -> pa.Array:
    """Heading paths as their normal string (headings_and_depth)."""
    return headings_and_depth(arr)[0]


def heading_depth(normal: pa.Array) -> np.ndarray:
    """How many segments a normal heading string has."""
    n = np.asarray(pc.count_substring(normal, " > "), dtype=np.int32) + 1
    return np.where(np.asarray(pc.binary_length(normal)) == 0, 0, n).astype(np.int32)


def rel_paths(arr: pa.Array) -> pa.Array:
    """rel_paths as the model normalises them (a null one is a BulkProblem: the field is required); worked
    out once per distinct path."""
    if arr.null_count:
        raise BulkProblem("rel_path is missing")
    return _spread(*by_distinct(arr, _normal_rel_paths))


def _normal_rel_paths(arr: pa.Array) -> pa.Array:
    fixed = mask(pc.match_substring_regex(arr, REL_PATH_FIXED)) & ~mask(pc.starts_with(arr, "./"))
    return map_unique(arr, ~fixed, normalise_rel_path, pa.string())


def blank(arr: pa.Array) -> np.ndarray:
    """Rows whose text is empty after str.strip() (null counts as blank)."""
    return mask(pc.fill_null(pc.match_substring_regex(arr, BLANK), True))


def choices(arr: pa.Array, fn: Callable[[str], str]) -> pa.Array:
    """An enumerated field through its model validator, once per distinct value (null stays null)."""
    return map_unique(arr, ~mask(pc.is_null(arr)), fn, pa.string())
