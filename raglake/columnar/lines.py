"""JSONL record files into Arrow tables in bulk (pyarrow's JSON reader), keeping each record's line:
the bulk path vouches for a file or raises BulkProblem, and the per-record path takes over."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from raglake import textfiles
from raglake.columnar.normalise import BulkProblem
from raglake.columnar.schema import HEADING_FORMS, NOT_NULL_WITH_DEFAULT, heading_type
from raglake.textfiles import BOM, MAX_NESTING, find_json_problem

_BOM = BOM.encode()
_NULL_FIELD = re.compile(rb'"(?:' + b"|".join(n.encode() for n in NOT_NULL_WITH_DEFAULT) + rb')"\s*:\s*null')
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_ESCAPE = re.compile(textfiles.LONE_ESCAPE.pattern.encode())
_ODD_STARTS_BYTES = b"\n \t\r\x0b\x0c/"  # a line starting so may be blank or a comment: looked at in Python
_ODD_STARTS = tuple(bytes([b]) for b in _ODD_STARTS_BYTES)
_ODD_LINE = re.compile(rb"\n[" + re.escape(_ODD_STARTS_BYTES) + rb"]")
BLOCK = 1 << 22  # pyarrow's JSON reader's block size, grown to the longest line where one is longer


class Lines:
    """The records of a JSONL file: the bytes the bulk reader parses (the file's own, or its record lines
    joined when // or whitespace lines had to be left out) and where each record's line lies in them
    (found when first asked for: a clean file is read without scanning it in Python)."""

    def __init__(self, path: str, data: bytes, n: int, offsets: tuple[np.ndarray, ...] | None = None, first: int = 1):
        self.path, self.data, self._n, self._offsets, self._first = path, data, n, offsets, first

    def __len__(self) -> int:
        return self._n

    def _find(self) -> tuple[np.ndarray, ...]:
        if self._offsets is None:  # a clean file (read_lines): every line is a record, no blank one between
            breaks = _newlines(self.data)[: self._n]
            starts = np.zeros(self._n, dtype=np.int64)
            starts[1:] = breaks[: self._n - 1] + 1
            ends = np.full(self._n, len(self.data), dtype=np.int64)
            ends[: len(breaks)] = breaks
            self._offsets = (starts, ends, np.arange(self._first, self._first + self._n, dtype=np.int64))
        return self._offsets

    @property
    def numbers(self) -> np.ndarray:
        """1-based line numbers of the records in the file."""
        return self._find()[2]

    def line(self, row: int) -> bytes:
        starts, ends, _ = self._find()
        return self.data[int(starts[row]) : int(ends[row])]

    def spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each record's line starts and ends in `data`."""
        starts, ends, _ = self._find()
        return starts, ends

    def strings(self) -> pa.Array:
        """Every record's line as one string array, built without a Python object per line: `data` holds the
        records in order, separated by newlines (and empty lines), and no record holds a newline."""
        starts, ends = self.spans()
        lengths = ends - starts
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        joined = self.data.replace(b"\n", b"")
        if len(joined) != offsets[-1]:
            raise AssertionError(f"{self.path}: {len(joined)} bytes of records, {offsets[-1]} expected")
        data = pa.py_buffer(joined)
        if offsets[-1] < 2**31:
            array = pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets.astype(np.int32)), data)
        else:
            array = pa.LargeStringArray.from_buffers(len(lengths), pa.py_buffer(offsets), data)
        array.validate(full=True)  # UTF-8 (a file the reader parsed is; a line of Lines(...) made by hand may not be)
        return array


def read_lines(path: str | Path, *, limit: bool = True) -> Lines:
    """A .jsonl/.ndjson file's records; anything else (or unreadable) is a BulkProblem. `limit`: a user's file,
    in which invalid UTF-8 (pyarrow's reader takes any bytes in a string) and a record line over
    raglake.textfiles.MAX_RECORD_BYTES are InputErrors, as in the per-record path, and what pyarrow's reader
    cannot be given is a BulkProblem (check_untrusted; raglake's own dumps are none of these)."""
    lines = _lines(Path(path), decode=limit)
    if limit:
        check_lengths(lines, textfiles.MAX_RECORD_BYTES)
        check_untrusted(lines)
    return lines


def _lines(path: Path, decode: bool) -> Lines:
    if not bulk_readable(path):
        raise BulkProblem("not JSONL")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise BulkProblem(str(e)) from None
    if decode:
        textfiles.decode(path, data)
    return lines_of(str(path), data)


def bulk_readable(path: Path) -> bool:
    """Whether the bulk reader may read the file: JSONL (any suffix but .json, .yaml, .yml and .csv)."""
    return path.suffix.lower() not in (".json", ".yaml", ".yml", ".csv")


def lines_of(path: str, data: bytes, first: int = 1) -> Lines:
    """The records of `data`, whole lines of a JSONL file starting at its line `first` (a BOM is left out at
    the file's start only)."""
    if first == 1 and data.startswith(_BOM):
        data = data[len(_BOM) :]
    if not data.startswith(_ODD_STARTS) and not _ODD_LINE.search(data):
        n = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
        return Lines(path, data, n, first=first)
    starts, ends, keep = _line_offsets(data)
    dropped = np.setdiff1d(np.arange(len(starts)), keep)
    if (starts[dropped] == ends[dropped]).all():  # empty lines only: pyarrow's reader passes over them
        return Lines(path, data, len(keep), (starts[keep], ends[keep], keep + first))
    return _joined(path, [data[starts[i] : ends[i]] for i in keep.tolist()], keep + first)


def _may_hold_line_of(data: bytes, size: int) -> bool:
    """False when no line of `data` is `size` bytes or longer: every aligned window of size // 2 bytes then
    holds a "\n" (a line that long covers one whole), found by bytes.find stopping at a window's first."""
    step = max(1, size // 2)
    return any(data.find(b"\n", at, at + step) < 0 for at in range(0, len(data) - step + 1, step))


def _longest(lines: Lines) -> int:
    starts, ends = lines.spans()
    return int((ends - starts).max()) if len(starts) else 0


def check_lengths(lines: Lines, limit: int) -> None:
    """Every record line at most `limit` bytes, or an InputError naming the first longer one."""
    if len(lines.data) <= limit or not _may_hold_line_of(lines.data, limit + 1):
        return
    starts, ends = lines.spans()
    over = np.flatnonzero(ends - starts > limit)
    if len(over):
        row = int(over[0])
        raise textfiles.too_long(lines.path, int(lines.numbers[row]), int(ends[row] - starts[row]))


def _block_size(lines: Lines) -> int:
    """BLOCK, or more than the longest line where one is longer (pyarrow's reader fails on a record that
    straddles two blocks)."""
    if len(lines.data) <= BLOCK or not _may_hold_line_of(lines.data, BLOCK):
        return BLOCK
    return max(BLOCK, _longest(lines) + 1)


def _line_offsets(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end) of every line ("\\n" only) and the indexes of those holding a record."""
    buf = np.frombuffer(data, dtype=np.uint8)
    breaks = _newlines(data)
    starts = np.concatenate([[0], breaks + 1]).astype(np.int64)
    ends = np.concatenate([breaks, [len(data)]]).astype(np.int64)
    first = np.full(len(starts), 10, dtype=np.uint8)
    inside = starts < len(data)
    first[inside] = buf[starts[inside]]
    odd = np.flatnonzero((ends == starts) | np.isin(first, np.frombuffer(_ODD_STARTS_BYTES, np.uint8)))
    drop = [i for i in odd.tolist() if _skipped(data[starts[i] : ends[i]])]
    return starts, ends, np.setdiff1d(np.arange(len(starts)), np.asarray(drop, dtype=np.int64))


def _newlines(data: bytes, block: int = 1 << 24) -> np.ndarray:
    """Where every "\n" lies, scanned a block at a time (no temporary array the size of the file)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    found = [np.flatnonzero(buf[at : at + block] == 10) + at for at in range(0, len(buf), block)]
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _skipped(line: bytes) -> bool:
    """A line records.read_records leaves out: blank, or a // comment."""
    return not line.strip() or line.lstrip().startswith(b"//")


def _joined(path: str, lines: Sequence[bytes], numbers: Sequence[int] | np.ndarray) -> Lines:
    lengths = np.fromiter((len(x) for x in lines), dtype=np.int64, count=len(lines))
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64) if len(lines) else lengths
    offsets = (starts, starts + lengths, np.asarray(numbers, dtype=np.int64))
    return Lines(path, b"\n".join(lines), len(lines), offsets)


def sniff_heading(lines: Lines) -> str:
    """'string' when the first heading_path written (in the first 256 KiB) is a string, else 'list'."""
    head = lines.data[: 1 << 18]
    for m in re.finditer(rb'"heading_path"\s*:\s*(.)', head):
        if m.group(1) == b'"':
            return "string"
        if m.group(1) == b"[":
            return "list"
    return "list"


def read_table(lines: Lines, schema_for: Callable[[pa.DataType], pa.Schema], free_form: Sequence[str] = ()) -> pa.Table:
    """The records as a table of `schema_for(heading type)` (plus the free-form fields, inferred): the
    heading form sniffed first, the other tried when it fails. Unknown fields, values of another type,
    invalid JSON, a line holding two records: BulkProblem."""
    if not len(lines):
        return schema_for(heading_type("list")).empty_table()
    first = sniff_heading(lines)
    forms = (first, *(f for f in HEADING_FORMS if f != first))
    data = lines.data
    if b"\\u" in data and _SURROGATE_ESCAPE.search(data) and (b"\\\\" in data or _LONE_ESCAPE.search(data)):
        # pairs only (an emoji in a file json.dumps wrote: ensure_ascii), unless a "\\\\" may hide a lone one
        raise BulkProblem("\\u escapes of surrogates that may be lone")  # the per-record reader checks them
    problem = ""
    for form in forms:
        schema = schema_for(heading_type(form))
        try:
            table = pj.read_json(
                io.BytesIO(data),
                read_options=pj.ReadOptions(block_size=_block_size(lines)),
                parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer"),
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            problem = str(e)
            continue
        _check_shape(table, schema, free_form, len(lines))
        if any(_has_float(table.schema.field(f).type) for f in free_form if f in table.column_names):
            _no_constants(lines)  # the explicit float fields are checked by their reader
        return table
    raise BulkProblem(problem)


def check_untrusted(lines: Lines) -> None:
    """What pyarrow's JSON reader cannot be given: it ends the process (SIGSEGV) on a file whose first line is
    `null` and on nesting ~10,000+ deep. A record line that is not an object ({...}), or that nests more than
    MAX_OPENERS deep, is a BulkProblem: the per-record reader names it. For a user's file; raglake's own dumps
    are neither."""
    starts, _ = lines.spans()
    buf = np.frombuffer(lines.data, dtype=np.uint8)
    for row in np.flatnonzero(buf[starts] != 0x7B).tolist():  # "{"; an indented line is looked at in Python
        if not lines.line(row).lstrip().startswith(b"{"):
            raise BulkProblem("a record that is not an object")
    if lines.data.count(b"[") + lines.data.count(b"{") <= MAX_OPENERS:
        return
    per_line = np.zeros(len(starts), dtype=np.int64)
    for at in range(0, len(buf), 1 << 24):  # no temporary array the size of the file
        part = buf[at : at + (1 << 24)]
        found = np.flatnonzero((part == 0x5B) | (part == 0x7B)) + at
        line = np.maximum(np.searchsorted(starts, found, side="right") - 1, 0)
        per_line += np.bincount(line, minlength=len(starts))
    for row in np.flatnonzero(per_line > MAX_OPENERS).tolist():  # '[' and '{' in strings count: a long text
        if nesting(lines.line(row)) > MAX_OPENERS:
            raise BulkProblem("a record nested too deeply for the bulk reader")


MAX_OPENERS = 1024  # far more than a record holds (a capture of 100 chunks ~250), far fewer than crash the reader


def nesting(line: bytes, window: int = 1 << 20) -> int:
    """How deep the JSON text `line` nests lists and objects, strings left out (a quote after an odd run of
    backslashes is inside its string), worked out `window` bytes at a time (a 64 MiB line costs a few MB)."""
    buf = np.frombuffer(line, dtype=np.uint8)
    deepest = depth = 0
    inside, run = False, 0  # within a string at the window's start; backslashes just before it
    for at in range(0, len(buf), window):
        part = buf[at : at + window]
        index = np.arange(len(part))
        last_plain = np.maximum.accumulate(np.where(part == 0x5C, -1 - run, index))  # last byte before: not "\\"
        quotes = np.flatnonzero(part == 0x22)
        before = np.where(quotes > 0, last_plain[np.maximum(quotes - 1, 0)], -1 - run)
        toggles = np.zeros(len(part), dtype=np.int8)
        toggles[quotes[(quotes - 1 - before) % 2 == 0]] = 1  # an even run of backslashes before the quote
        outside = (np.cumsum(toggles, dtype=np.int64) + inside) % 2 == 0
        opens = outside & ((part == 0x5B) | (part == 0x7B))
        closes = outside & ((part == 0x5D) | (part == 0x7D))
        levels = depth + np.cumsum(opens.astype(np.int64) - closes.astype(np.int64))
        deepest = max(deepest, int(levels.max()))
        depth, inside = int(levels[-1]), (int(inside) + int(toggles.sum())) % 2 == 1
        run = len(part) - 1 - int(last_plain[-1])  # backslashes at its end (a run may span windows)
    return deepest


def _has_float(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return any(_has_float(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _has_float(t.value_type)
    return pa.types.is_floating(t)


def _no_constants(lines: Lines) -> None:
    """NaN and Infinity, which pyarrow's reader takes for numbers and strict JSON refuses (outside strings)."""
    if b"NaN" not in lines.data and b"Infinity" not in lines.data:
        return
    for line in (lines.line(i) for i in range(len(lines))):
        if (b"NaN" in line or b"Infinity" in line) and find_json_problem(line.decode("utf-8", "replace")):
            raise BulkProblem("NaN or Infinity")


def _check_shape(table: pa.Table, schema: pa.Schema, free_form: Sequence[str], n: int) -> None:
    if table.num_rows != n:
        raise BulkProblem(f"{table.num_rows} records read from {n} lines")
    for f in table.schema:
        if f.name in free_form:
            if _depth(f.type) >= MAX_NESTING:
                raise BulkProblem(f"{f.name} is nested deeply")
        elif f.name not in schema.names or schema.field(f.name).type != f.type:
            raise BulkProblem(f"unknown or mistyped field under {f.name}")


def _depth(t: pa.DataType) -> int:
    if pa.types.is_struct(t):
        return 1 + max((_depth(t.field(i).type) for i in range(t.num_fields)), default=0)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return 1 + _depth(t.value_type)
    return 0


def check_nulls(lines: Lines, rows: np.ndarray) -> None:
    """A null read for a field that has a default but may not be null: missing (fine) or written as null
    (an error the per-record path explains). Only the rows given are looked at."""
    for i in np.flatnonzero(rows) if rows.dtype == bool else rows:
        line = lines.line(int(i))
        if b"null" in line and _NULL_FIELD.search(line):
            raise BulkProblem(f"null written for a field that may not be null (line {lines.numbers[int(i)]})")


def from_dumps(path: str, dumps: list[bytes], numbers: Sequence[int]) -> Lines:
    """Lines made of model dumps (the per-record path's result, read back in bulk) at the records' lines."""
    return _joined(path, dumps, numbers)
