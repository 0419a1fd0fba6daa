"""Strict reading of input files: UTF-8 (a BOM allowed), JSON without duplicate keys, NaN/Infinity or
lone surrogates (YAML: raglake.yamltext); every problem is an InputError naming file and line.
Lines count "\\n" only, as editors and `records.read_records` do."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from raglake.errors import InputError

MAX_NESTING = 32  # levels of lists/objects in free-form values (metadata); far more than any real file
# the longest record a JSONL input may hold, one line in bytes (README "Golden set"): a 64 MiB line costs about
# 0.3 GB to read in bulk and score; read as a module attribute where it is used (a test lowers it)
MAX_RECORD_BYTES = 64 << 20
CONFIG_MAX_BYTES = 2**20  # a config file (gate rules, http target, judge prices, prompt): read no further
BOM = "\ufeff"
_WS = re.compile(r"[ \t\n\r]*")
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]|NaN|-?Infinity')
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # fast: a literal prefix
# a high-surrogate escape not followed by a low one, or a low one not preceded by a high one
LONE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Rejected(ValueError):
    """Raised inside the JSON decoder's hooks; the text is then scanned for the line."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        raise _Rejected("duplicate key in one object")
    return found


def _constant(name: str) -> Any:
    raise _Rejected(f"{name} is not allowed")


_STRICT = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)
_PLAIN = json.JSONDecoder()


class LineIndex:
    """1-based line of a character offset ("\\n" only), by bisection."""

    def __init__(self, text: str, first_line: int = 1):
        self._starts = [m.end() for m in re.finditer("\n", text)]
        self._first = first_line

    def line(self, offset: int) -> int:
        return self._first + bisect.bisect_right(self._starts, offset)


def _existing_file(path: str | Path) -> Path:
    """The path, when it names a file; a folder or a missing file is an InputError."""
    path = Path(path)
    if path.is_dir():
        raise InputError(str(path), None, None, "is a folder, not a file")
    if not path.exists():
        raise InputError(str(path), None, None, "file not found")
    return path


def read_text(path: str | Path, max_bytes: int | None = None) -> str:
    """The file's text; a folder, a missing or unreadable file, invalid UTF-8 and (with `max_bytes`, for a
    config file) a file of more bytes than that, found before it is read further, are InputErrors."""
    path = _existing_file(path)
    try:
        with path.open("rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as e:
        raise InputError(str(path), None, None, f"cannot read the file: {e.strerror or e}") from None
    if max_bytes is not None and len(data) > max_bytes:
        try:
            size = f"{path.stat().st_size} bytes"
        except OSError:
            size = f"more than {max_bytes} bytes"
        limit = f"{max_bytes} bytes" + (" (1 MiB)" if max_bytes == 2**20 else "")
        raise InputError(str(path), None, None, f"is {size}; a config file may be at most {limit}")
    return decode(path, data)


def decode(path: str | Path, data: bytes, first_line: int = 1) -> str:
    """UTF-8 text without a leading BOM (at the start of the file only: `first_line` 1); invalid UTF-8
    names the line of the first bad byte (`data` starting at line `first_line`)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(
            str(path),
            first_line + data.count(b"\n", 0, e.start),
            None,
            f"invalid UTF-8: byte 0x{data[e.start]:02x} at byte {column} of the line ({e.reason})",
        ) from None
    return text[1:] if first_line == 1 and text.startswith(BOM) else text


def too_long(path: str | Path, line: int, size: int) -> InputError:
    """The error for a record line of `size` bytes, over MAX_RECORD_BYTES."""
    limit = f"{MAX_RECORD_BYTES / 2**20:g} MiB"
    return InputError(str(path), line, None, f"the line is {size / 2**20:.1f} MiB; the limit is {limit} per record")


def over(raw: str, limit: int | None) -> int:
    """The UTF-8 length of the line `raw` when it is over `limit` bytes, else 0 (a short line is not encoded)."""
    if limit is None or 4 * len(raw) <= limit:
        return 0
    size = len(raw.encode("utf-8"))
    return size if size > limit else 0


def iter_lines(path: str | Path, chunk_bytes: int = 1 << 22, max_line: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a file, read a few MB at a time (memory does not grow with
    the file), with read_text's checks; lines are split at "\n" only, as records.read_records does. A line
    over `max_line` bytes is an InputError (too_long), found before more than that is held."""
    for first, block in iter_blocks(path, chunk_bytes, max_line):
        yield from block_lines(path, block, first, max_line)


def iter_blocks(
    path: str | Path, chunk_bytes: int = 1 << 22, max_line: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """(the line it starts on, bytes) of the file's whole lines, about `chunk_bytes` at a time (the last may
    lack its line end); a missing or unreadable file, and a line over `max_line` bytes found before more than
    that is held, are InputErrors. The bytes are not decoded: block_lines does that."""
    path = _existing_file(path)
    line, rest = 1, b""
    try:
        with path.open("rb") as f:
            while True:
                chunk = f.read(chunk_bytes)
                data = rest + chunk
                if not data:
                    return
                cut = len(data) if not chunk else data.rfind(b"\n") + 1
                if cut == 0 and chunk:  # no line end yet: read on
                    if max_line is not None and len(data) > max_line:
                        raise too_long(path, line, len(data) + _to_line_end(f, chunk_bytes))
                    rest = data
                    continue
                block, rest = data[:cut], data[cut:]
                yield line, block
                line += block.count(b"\n")
                if not chunk:
                    return
    except OSError as e:
        raise InputError(str(path), None, None, f"cannot read the file: {e.strerror or e}") from None


def block_lines(path: str | Path, block: bytes, first: int, max_line: int | None = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lines of a block of iter_blocks starting at line `first`: decoded (invalid
    UTF-8 is an InputError), a line over `max_line` bytes an InputError (too_long)."""
    lines = decode(path, block, first).split("\n")
    if lines[-1] == "":  # the text ended with a line end (or was only a BOM)
        lines.pop()
    for i, raw in enumerate(lines):
        if size := over(raw, max_line):
            raise too_long(path, first + i, size)
        yield first + i, raw


def _to_line_end(f: Any, chunk_bytes: int) -> int:
    """How many bytes `f` holds before its next "\n" (or its end), read a chunk at a time and not kept."""
    count = 0
    while chunk := f.read(chunk_bytes):
        end = chunk.find(b"\n")
        if end >= 0:
            return count + end
        count += len(chunk)
    return count


def parse_json(path: str | Path, text: str, first_line: int = 1) -> Any:
    """One JSON document (a JSONL line, or a whole .json file starting at `first_line`)."""
    try:
        value = _STRICT.decode(text)
    except json.JSONDecodeError as e:
        raise InputError(
            str(path), first_line + e.lineno - 1, None, f"invalid JSON: {e.msg} at column {e.colno}"
        ) from None
    except (_Rejected, RecursionError) as e:
        deep = isinstance(e, RecursionError)
        offset, message = find_json_problem(text, deep=deep) or (0, "nested too deeply" if deep else str(e))
        raise InputError(str(path), LineIndex(text, first_line).line(offset), None, message) from None
    if _SURROGATE_ESCAPE.search(text) and LONE_ESCAPE.search(text):  # rare: only then scan the text
        found = find_json_problem(text)
        if found:
            raise InputError(str(path), LineIndex(text, first_line).line(found[0]), None, found[1])
    return value


def find_json_problem(text: str, *, deep: bool = False) -> tuple[int, str] | None:
    """(offset, message) of the first duplicate key, NaN/Infinity or lone surrogate in JSON text (and,
    with `deep`, of the first level past MAX_NESTING); None when there is none."""
    stack: list[set[str] | None] = []
    pending: tuple[str, int] | None = None
    for m in _TOKEN.finditer(text):
        token, start = m.group(), m.start()
        if token[0] == '"':
            value = _PLAIN.decode(token)
            if LONE_SURROGATE.search(value):
                return start, f"a lone surrogate ({LONE_SURROGATE.search(value).group()!a}) is not text"
            pending = (value, start)
            continue
        if token == ":":
            if pending and stack and stack[-1] is not None:
                if pending[0] in stack[-1]:
                    return pending[1], f"duplicate key {pending[0]!r} in one object"
                stack[-1].add(pending[0])
        elif token in "{[":
            stack.append(set() if token == "{" else None)
            if deep and len(stack) > MAX_NESTING:
                return start, f"nested deeper than {MAX_NESTING} levels"
        elif token in "}]":
            if stack:
                stack.pop()
        else:
            return start, f"{token} is not allowed (JSON has no NaN or Infinity; write null)"
        pending = None
    return None


def skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def member_offset(text: str, key: str) -> int:
    """Where the value of `key` starts in the (valid, duplicate-free) JSON object that is `text`."""
    pos = skip_ws(text, 0) + 1
    while True:
        name, pos = _PLAIN.raw_decode(text, skip_ws(text, pos))
        pos = skip_ws(text, skip_ws(text, pos) + 1)  # past the ':'
        if name == key:
            return pos
        _, pos = _PLAIN.raw_decode(text, pos)
        pos = skip_ws(text, pos) + 1  # past the ','


def element_offsets(text: str, start: int) -> list[int]:
    """Where each element starts in the (valid) JSON list that opens at `start`."""
    out, pos = [], skip_ws(text, start + 1)
    while text[pos] != "]":
        out.append(pos)
        _, pos = _PLAIN.raw_decode(text, pos)
        pos = skip_ws(text, pos)
        if text[pos] == ",":
            pos = skip_ws(text, pos + 1)
    return out
