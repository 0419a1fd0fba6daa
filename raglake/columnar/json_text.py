"""JSON text written from Arrow columns, a whole column at a time: the text pydantic's `model_dump_json`
writes (compact; non-ASCII as it is; the json module's string escapes) or the json module's own
`json.dumps(..., sort_keys=True, ensure_ascii=False)`, for the values a record model holds. Floats are written
only where both writers agree on their text (FLOAT_SAFE); a row holding another is marked, for its model to
write (raglake.columnar.ingest). tests/test_bulk_ingest.py holds every form to the models' own dumps."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar.arrays import combine, flat
from raglake.columnar.normalise import mask

# Arrow's float text is pydantic's for 0 and for 1e-5 <= |x| < 1e10 once ".0" is added to a whole number; outside
# that range one of them writes an exponent where the other does not (1e-06 / 0.000001, 1e+10 / 10000000000.0)
FLOAT_SAFE = (1e-5, 1e10)
_CONTROL = "[\\x00-\\x1f]"
_SHORT_ESCAPES = (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"), ("\f", "\\f"))


@dataclass(frozen=True)
class Style:
    """How objects and lists are written: pydantic's compact JSON, or json.dumps' defaults with sorted keys."""

    item: str
    key: str
    sort: bool


COMPACT = Style(",", ":", False)
SORTED = Style(", ", ": ", True)


@dataclass
class Text:
    """A column's values as JSON text (no nulls: a null is "null") and the rows holding a float outside
    FLOAT_SAFE (their text is not to be trusted)."""

    text: pa.Array
    odd: np.ndarray


def strings(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    """JSON string literals ("null" for null): '\\' and '"' escaped, and the control characters as the json
    module escapes them (\\n, \\r, \\t, \\b, \\f; any other as \\u00XX)."""
    arr = combine(arr)
    if pa.types.is_null(arr.type):
        return pa.array(["null"] * len(arr), pa.string())
    out = pc.replace_substring(pc.replace_substring(arr, "\\", "\\\\"), '"', '\\"')
    if mask(pc.match_substring_regex(out, _CONTROL)).any():
        for char, escaped in _SHORT_ESCAPES:
            out = pc.replace_substring(out, char, escaped)
        rest = mask(pc.match_substring_regex(out, _CONTROL))
        if rest.any():
            written = [json.dumps(v, ensure_ascii=False)[1:-1] for v in arr.filter(pa.array(rest)).to_pylist()]
            out = pc.replace_with_mask(out, pa.array(rest), pa.array(written, out.type))
    return pc.fill_null(pc.binary_join_element_wise('"', out, '"', ""), "null")


def values(arr: pa.Array | pa.ChunkedArray, style: Style = COMPACT) -> Text:
    """A column of strings, booleans, integers, floats or lists of them as JSON text."""
    arr = combine(arr)
    n, kind = len(arr), arr.type
    odd = np.zeros(n, dtype=bool)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return Text(strings(arr), odd)
    if pa.types.is_boolean(kind):
        return Text(pc.fill_null(pc.if_else(arr, "true", "false"), "null"), odd)
    if pa.types.is_integer(kind):
        return Text(pc.fill_null(pc.cast(arr, pa.string()), "null"), odd)
    if pa.types.is_floating(kind):
        return _floats(arr)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        parent, _, items = flat(pc.fill_null(arr, pa.scalar([], kind)), n)
        inner = values(items, style)
        listed = lists(parent, n, inner.text, style)
        odd[parent[inner.odd]] = True
        return Text(pc.if_else(pc.is_valid(arr), listed, "null"), odd)
    raise TypeError(f"no JSON text for {kind}")


def repeated(
    arr: pa.Array | pa.ChunkedArray, style: Style = COMPACT, prepare: Callable[[pa.Array], pa.Array] | None = None
) -> Text:
    """values() of a column of strings whose values repeat (paths, headings), each distinct value written once
    (`prepare`: what to write of a value, e.g. a heading's segments); no floats."""
    encoded = pc.dictionary_encode(combine(arr))
    distinct = encoded.dictionary if prepare is None else prepare(encoded.dictionary)
    text = pc.fill_null(values(distinct, style).text.take(encoded.indices), "null")
    return Text(text, np.zeros(len(text), dtype=bool))


def _floats(arr: pa.Array) -> Text:
    text = pc.cast(arr, pa.string())
    whole = pc.invert(pc.match_substring_regex(text, "[.en]"))
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text)
    size = pc.abs(arr)
    inside = pc.or_(pc.equal(arr, 0), pc.and_(pc.greater_equal(size, FLOAT_SAFE[0]), pc.less(size, FLOAT_SAFE[1])))
    return Text(pc.fill_null(text, "null"), ~mask(pc.fill_null(inside, True)))


def lists(parent: np.ndarray, n: int, items: pa.Array, style: Style) -> pa.Array:
    """Row i's list: the JSON texts `items` whose parent is i (sorted by parent), as "[a,b]". Each item gets
    its row's "[" or the separator before it and "]" after the row's last; a row's text is then its items'
    bytes as they lie, one after another (no copy of them per row)."""
    counts = np.bincount(parent, minlength=n)
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    position = np.arange(len(parent)) - starts[parent]
    first = pa.array(position == 0)
    last = pa.array(position == counts[parent] - 1)
    text = pc.binary_join_element_wise(
        pc.if_else(first, "[", style.item), combine(items), pc.if_else(last, "]", ""), ""
    )
    width = np.int64 if pa.types.is_large_string(text.type) else np.int32
    offsets = np.frombuffer(text.buffers()[1], dtype=width)[text.offset : text.offset + len(text) + 1]
    ends = offsets.astype(np.int64)[starts]
    if ends[-1] < 2**31:
        rows = pa.StringArray.from_buffers(n, pa.py_buffer(ends.astype(np.int32)), text.buffers()[2])
    else:
        rows = pa.LargeStringArray.from_buffers(n, pa.py_buffer(ends), text.buffers()[2])
    return pc.if_else(pa.array(counts == 0), "[]", rows)


def objects(fields: Sequence[tuple[str, pa.Array]], style: Style, optional: Sequence[str] = ()) -> pa.Array:
    """Row by row, the object of these fields' texts (in their order, or sorted by name); an `optional` field,
    which must come last, is left out of the rows where it is "null" (pydantic's exclude_if)."""
    fields = sorted(fields) if style.sort else list(fields)
    if [name for name, _ in fields[len(fields) - len(optional) :]] != list(optional):
        raise ValueError("optional fields come last")
    pieces: list[pa.Array | str] = []
    for i, (name, text) in enumerate(fields):
        label = ("{" if i == 0 else style.item) + json.dumps(name, ensure_ascii=False) + style.key
        if name in optional:
            given = pc.not_equal(text, "null")
            pieces.append(pc.if_else(given, pc.binary_join_element_wise(label, text, ""), ""))
        else:
            pieces += [label, text]
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, "")
