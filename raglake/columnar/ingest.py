"""Golden sets and capture files read in bulk into their canonical lines (issue 29, item 2): a JSONL file is
read a block of whole lines at a time (textfiles.iter_blocks, the blocks the per-record reader decodes); the
bulk reader (columnar.lines, golden, captures) checks a block against the models' rules and, where it vouches
for every record, each record's canonical line (its model's `model_dump_json`) and JSON-mode dump (what the
golden set's content hash is made of) are written from the columns, byte for byte what the models give,
without a model. A block the bulk reader cannot vouch for (an error, or a value it does not handle) comes
back as its records, for the per-record path, which names file, line and field."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel

from raglake import textfiles
from raglake.columnar import json_text as jt
from raglake.columnar.arrays import combine
from raglake.columnar.captures import capture_columns
from raglake.columnar.golden import GoldenColumns, Part, golden_columns
from raglake.columnar.json_text import COMPACT, SORTED
from raglake.columnar.lines import Lines, bulk_readable, check_lengths, check_untrusted, lines_of, read_table
from raglake.columnar.normalise import BulkProblem
from raglake.columnar.schema import GOLDEN_FREE_FORM, capture_schema, golden_schema
from raglake.errors import InputError
from raglake.records import Record, validate_record
from raglake.schemas import (
    AnswerLabel,
    Capture,
    ChunkLabel,
    GoldenCase,
    GoldSupport,
    Latency,
    Reference,
    RetrievedChunk,
    content_text,
)
from raglake.schemas import _plain_metadata as plain_metadata
from raglake.textfiles import parse_json

# a case's metadata is written in Python: compactly (a float json writes with an exponent sends its case to the
# model) and as the content hash reads it (schemas.content_text)
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False)


@dataclass
class Canonical:
    """The records of a block the bulk reader vouched for, in file order."""

    keys: list[str]  # each record's id (a golden case's `id`, a capture's `case_id`)
    numbers: list[int]  # the file's line each record is on
    lines: pa.Array  # each record's canonical line (its model's model_dump_json())
    hashed: pa.Array | None = None  # a golden case's part of the content hash (raglake.golden.content_hash)
    methods: pa.Array | None = None  # a capture's method

    def data(self, text: pa.Array) -> tuple[memoryview, list[int]]:
        """The texts one a line, as bytes (a view of Arrow's buffer), and each line's length (its newline
        included)."""
        joined = pc.binary_join_element_wise(text, "\n", "")
        width = np.int64 if pa.types.is_large_string(joined.type) else np.int32
        offsets = np.frombuffer(joined.buffers()[1], dtype=width)[joined.offset : joined.offset + len(joined) + 1]
        return memoryview(joined.buffers()[2])[int(offsets[0]) : int(offsets[-1])], np.diff(offsets).tolist()


Block = Canonical | Iterator[Record]
# the blocks the per-record reader decodes (textfiles.iter_lines): an invalid byte is reported where it reports it
BLOCK_BYTES = 1 << 22


# a smaller file is validated record by record: the bulk reader's one-time costs in a process (pyarrow's first
# conversions import pandas, its compute functions and regular expressions start) are ~0.4 s, while one model a
# record takes 0.03-0.08 s a MiB (benchmarks/ingest.py); both give the same bytes (tests/test_bulk_ingest.py)
BULK_MIN_BYTES = 4 << 20


def worth_reading_in_bulk(path: str | Path) -> bool:
    """Whether a golden set or capture file is read in bulk: JSONL, and large enough to pay for it."""
    path = Path(path)
    try:
        return bulk_readable(path) and path.stat().st_size >= BULK_MIN_BYTES
    except OSError:  # missing or unreadable: the per-record reader names the problem
        return False


def golden_blocks(path: str | Path) -> Iterator[Block]:
    """A JSONL golden set's records a block at a time: Canonical where the bulk reader vouches for the block,
    else the block's records (a file that is not JSONL is a ValueError: raglake.golden reads it record by record)."""
    return _blocks(Path(path), _golden)


def capture_blocks(path: str | Path) -> Iterator[Block]:
    """A capture file's records a block at a time, as golden_blocks."""
    return _blocks(Path(path), _captures)


def _blocks(path: Path, canonical: Callable[[Lines], Canonical]) -> Iterator[Block]:
    if not bulk_readable(path):
        raise ValueError(f"{path}: only a JSONL file is read a block at a time")
    for first, data in textfiles.iter_blocks(path, BLOCK_BYTES, textfiles.MAX_RECORD_BYTES):
        textfiles.decode(path, data, first)  # UTF-8 first, as the per-record path decodes a block first
        try:
            lines = lines_of(str(path), data, first)
            _within_limit(lines)
            check_untrusted(lines)
            yield canonical(lines)
        except BulkProblem:
            yield _records(path, data, first)


def _within_limit(lines: Lines) -> None:
    """Every record line within MAX_RECORD_BYTES; else the per-record path reads the block (an earlier
    record's error comes first)."""
    try:
        check_lengths(lines, textfiles.MAX_RECORD_BYTES)
    except InputError as e:
        raise BulkProblem(str(e)) from None


def _records(path: Path, data: bytes, first: int) -> Iterator[Record]:
    """The block's records as raglake.spool.iter_records reads them."""
    for number, raw in textfiles.block_lines(path, data, first, textfiles.MAX_RECORD_BYTES):
        if raw.strip() and not raw.lstrip().startswith("//"):
            yield Record(number, parse_json(path, raw, number))


def _golden(lines: Lines) -> Canonical:
    """A block of golden cases: each case's canonical line and its part of the content hash."""
    table = read_table(lines, golden_schema, GOLDEN_FREE_FORM)
    cols = golden_columns(table, lines)
    n = len(cols)
    metadata = _metadata(table, lines, n)
    groups = pc.fill_null(combine(table.column("required_support_groups")), pa.scalar([], pa.list_(pa.int64())))
    names = [name for name in GoldenCase.model_fields if name != "assertions"]  # a case's own: a BulkProblem
    texts = {}
    for style in (COMPACT, SORTED):
        fields = {name: jt.values(cols.cases.column(name), style) for name in cols.cases.column_names}
        fields["gold_supports"] = _objects(cols.supports, GoldSupport, n, style)
        fields["required_support_groups"] = jt.values(groups, style)
        fields["labels"] = _labels(table, cols, n, style)
        fields["metadata"] = metadata[style]
        texts[style] = _rows(fields, names, style)
    odd = texts[COMPACT].odd | texts[SORTED].odd
    ids = cols.cases.column("id")
    case = _by_model(lines, odd, GoldenCase, lambda m: (m.model_dump_json(), content_text(m.model_dump(mode="json"))))
    line, hashed = _patched(texts[COMPACT].text, odd, case, 0), _patched(texts[SORTED].text, odd, case, 1)
    return Canonical(ids.to_pylist(), lines.numbers.tolist(), line, hashed)


def _captures(lines: Lines) -> Canonical:
    """A block of captures: each capture's canonical line."""
    table = read_table(lines, capture_schema)
    cols = capture_columns(table, lines)
    n = len(cols)
    captures = cols.captures
    fields = {name: jt.values(captures.column(name)) for name in captures.column_names if name in Capture.model_fields}
    fields["references"] = _objects(cols.references, Reference, n, COMPACT)
    fields["retrieved"] = _objects(cols.chunks, RetrievedChunk, n, COMPACT)
    stages = [(stage, jt.values(captures.column(f"latency_{stage}"))) for stage in Latency.model_fields]
    fields["latency_ms"] = jt.Text(jt.objects([(s, t.text) for s, t in stages], COMPACT), _any(t for _, t in stages))
    text = _rows(fields, list(Capture.model_fields), COMPACT, optional=("cost_usd",))  # dumped only where given
    capture = _by_model(lines, text.odd, Capture, lambda m: (m.model_dump_json(),))
    line = _patched(text.text, text.odd, capture, 0)
    return Canonical(
        captures.column("case_id").to_pylist(), lines.numbers.tolist(), line, methods=captures.column("method")
    )


def _rows(fields: dict[str, jt.Text], names: list[str], style: jt.Style, optional: Sequence[str] = ()) -> jt.Text:
    """Each row's object of the fields `names` (a model's fields, in its order)."""
    text = jt.objects([(name, fields[name].text) for name in names], style, optional)
    return jt.Text(text, _any(fields[name] for name in names))


def _any(texts: Iterable[jt.Text]) -> np.ndarray:
    """The rows any of the texts marks odd."""
    return np.logical_or.reduce([t.odd for t in texts])


_ANCHOR = ("rel_path", "heading_path")  # written once per distinct value: they repeat across a file


def _objects(part: Part, model: type[BaseModel], n: int, style: jt.Style) -> jt.Text:
    """Each row's list of the part's elements, each an object of `model`'s fields (an anchor's heading path
    as its segments: a normal segment holds no '>', so the split is exact)."""
    fields = {name: jt.values(part.column(name), style) for name in model.model_fields if name not in _ANCHOR}
    if "rel_path" in model.model_fields:
        fields["heading_path"] = jt.repeated(part.column("heading"), style, _segments)
        fields["rel_path"] = jt.repeated(part.column("rel_path"), style)
    items = _rows(fields, list(model.model_fields), style)
    odd = np.zeros(n, dtype=bool)
    odd[part.parent[items.odd]] = True
    return jt.Text(jt.lists(part.parent, n, items.text, style), odd)


def _segments(headings: pa.Array) -> pa.Array:
    """Normal heading strings ("A > B") as their lists of segments ("" is [])."""
    split = pc.split_pattern(headings, " > ")
    return pc.if_else(pc.equal(headings, ""), pa.scalar([], pa.list_(pa.string())), split)


def _labels(table: pa.Table, cols: GoldenColumns, n: int, style: jt.Style) -> jt.Text:
    """A case's labels: null, or the object of its chunk and answer labels."""
    chunks = _objects(cols.chunk_labels, ChunkLabel, n, style)
    answers = _objects(cols.answer_labels, AnswerLabel, n, style)
    both = jt.objects([("chunks", chunks.text), ("answers", answers.text)], style)
    given = pc.is_valid(combine(table.column("labels")))
    return jt.Text(pc.if_else(given, both, "null"), chunks.odd | answers.odd)


def _metadata(table: pa.Table, lines: Lines, n: int) -> dict[jt.Style, jt.Text]:
    """Each case's metadata as the model holds it (read from its line: the reader's inferred struct keeps
    neither a record's key order nor its ints apart from its floats) and checked by the model's own rule,
    as text in both styles; a case holding a float that json writes with an exponent is marked."""
    given = np.zeros(n, dtype=bool)
    if "metadata" in table.column_names and table.schema.field("metadata").type.num_fields:  # struct<>: all {}
        given = np.asarray(pc.is_valid(combine(table.column("metadata"))), dtype=bool)
    compact, hashed, odd = ["{}"] * n, ["{}"] * n, np.zeros(n, dtype=bool)
    for row in np.flatnonzero(given).tolist():
        value = json.loads(lines.line(row))["metadata"]
        try:
            plain_metadata(value)
        except ValueError as e:
            raise BulkProblem(str(e)) from None
        compact[row], hashed[row] = _COMPACT.encode(value), content_text(value)
        odd[row] = _has_odd_float(value)
    return {COMPACT: jt.Text(pa.array(compact, pa.string()), odd), SORTED: jt.Text(pa.array(hashed, pa.string()), odd)}


def _by_model(
    lines: Lines, odd: np.ndarray, model: type[BaseModel], dump: Callable[[Any], tuple[str, ...]]
) -> dict[int, tuple[str, ...]]:
    """The texts `dump` makes of the marked rows' models, each validated from its line as the per-record path
    validates it (the bulk reader vouched for the line)."""
    numbers = lines.numbers
    out = {}
    for row in np.flatnonzero(odd).tolist():
        record = Record(int(numbers[row]), json.loads(lines.line(row)))
        out[row] = dump(validate_record(record, model, lines.path))
    return out


def _patched(text: pa.Array, odd: np.ndarray, by_model: dict[int, tuple[str, ...]], which: int) -> pa.Array:
    if not by_model:
        return text
    rows = sorted(by_model)
    return pc.replace_with_mask(text, pa.array(odd), pa.array([by_model[r][which] for r in rows], text.type))


def _has_odd_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if "e" in repr(item):  # json writes 1e-05, pydantic 0.00001; without an exponent both write repr's digits
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
