"""Validated records kept on disk, not in memory: a golden set or a capture file of a million cases is
read once, line by line, each record validated and written in canonical JSON (one a line) to a spool
file; memory then holds a byte offset, an id and a source line per record, and the models are parsed
back only for the slice being worked on. JSONL files stream; a JSON list or YAML file is read whole
(those formats cannot be read a record at a time)."""

from __future__ import annotations

import os
import tempfile
import weakref
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import IO, Generic, TypeVar, overload

from pydantic import BaseModel

from raglake import textfiles
from raglake.importers import csv_records
from raglake.records import Record, read_records
from raglake.schemas import CANONICAL
from raglake.textfiles import iter_lines, parse_json

M = TypeVar("M", bound=BaseModel)


def iter_records(path: str | Path, *, list_key: str | tuple[str, ...] = "cases") -> Iterator[Record]:
    """read_records, one record at a time for .jsonl/.ndjson (and any suffix that is not JSON, YAML or
    CSV); a .csv file's rows (raglake.importers.csv_records). A JSONL line over textfiles.MAX_RECORD_BYTES is
    an InputError."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        yield from csv_records(path)
        return
    if path.suffix.lower() in (".yaml", ".yml", ".json"):
        yield from read_records(path, list_key=list_key)
        return
    for number, raw in iter_lines(path, max_line=textfiles.MAX_RECORD_BYTES):
        if not raw.strip() or raw.lstrip().startswith("//"):
            continue
        yield Record(number, parse_json(path, raw, number))


@dataclass(frozen=True)
class SpoolIndex:
    """Where a spool's records lie in its file, their ids and source lines: what another process that
    filled the file (raglake.pipeline.inputs) sends back, so that the spool's owner can read it."""

    offsets: array
    lines: array
    ids: list[str]


class Spool(Sequence[M], Generic[M]):
    """Models of one type in a temporary file with no name, by position and by id. The file is unlinked as
    it is made: the system frees it with its last descriptor, so that a process ended any way at all (the
    OOM killer, SIGTERM's default action, a timeout) leaves nothing in the temp folder, where a million
    cases' spools take ~1.5 GB. With `into`, the records are written to another process's spool file,
    whose descriptor this process inherited (raglake.pipeline.inputs); its owner takes them over with
    `adopt`."""

    def __init__(self, model: type[M], id_field: str, *, into: int | None = None):
        self.model, self.id_field = model, id_field
        if into is None:
            # unbuffered: read and written only by position (os.pread / os.pwrite) on its descriptor, which
            # is closed with the file object when the spool goes
            self._file: IO[bytes] | None = tempfile.TemporaryFile(buffering=0, prefix="raglake-spool-")
            self._fd = self._file.fileno()
        else:
            self._file, self._fd = None, into
            weakref.finalize(self, os.close, self._fd)
        self._offsets = array("q", [0])
        self._lines = array("q")
        self.ids: list[str] = []
        self._index: dict[str, int] = {}

    def fileno(self) -> int:
        """The descriptor of the spool's file (for another process to inherit and fill: `into`)."""
        return self._fd

    def index(self) -> SpoolIndex:
        return SpoolIndex(self._offsets, self._lines, self.ids)

    def adopt(self, index: SpoolIndex) -> None:
        """Take over the records another process wrote to this spool's file (this spool is still empty)."""
        if self.ids:
            raise ValueError("only an empty spool adopts another's records")
        self._offsets, self._lines, self.ids = index.offsets, index.lines, index.ids
        self._index = {key: position for position, key in enumerate(self.ids)}

    def append(self, item: M, line: int | None = None) -> None:
        """Add a validated model (its id must be new: the caller reports duplicates with their lines)."""
        data = item.model_dump_json().encode() + b"\n"
        os.pwrite(self._fd, data, self._offsets[-1])
        self._offsets.append(self._offsets[-1] + len(data))
        key = getattr(item, self.id_field)
        self._index[key] = len(self.ids)
        self.ids.append(key)
        self._lines.append(line or 0)

    def extend(
        self, data: bytes | memoryview, sizes: Sequence[int], keys: Sequence[str], numbers: Sequence[int]
    ) -> None:
        """Add records as their canonical lines (each a model's `model_dump_json()` and a newline, written
        without the model: raglake.columnar.ingest), `data` holding them one after another, `sizes` their
        lengths; in one write. Their ids must be new, as for append."""
        view, at = memoryview(data), self._offsets[-1]
        while view:  # a write may take fewer bytes than it is given
            written = os.pwrite(self._fd, view, at)
            view, at = view[written:], at + written
        start = self._offsets[-1]
        self._offsets.extend(start + end for end in accumulate(sizes))
        for key in keys:
            self._index[key] = len(self.ids)
            self.ids.append(key)
        self._lines.extend(numbers)

    def position(self, key: str) -> int | None:
        return self._index.get(key)

    def line(self, position: int) -> int:
        """The source file's line the record at `position` came from (0: not from a file)."""
        return self._lines[position]

    def raw(self, start: int, stop: int) -> bytes:
        """The canonical JSON lines of records start..stop-1, as written (what staging copies); positional
        reads, so threads may read at once."""
        return os.pread(self._fd, self._offsets[stop] - self._offsets[start], self._offsets[start])

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> M: ...
    @overload
    def __getitem__(self, index: slice) -> list[M]: ...
    def __getitem__(self, index: int | slice) -> M | list[M]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return [
                self.model.model_validate_json(b, context=CANONICAL) for b in self.raw(start, stop).splitlines() if b
            ]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.model.model_validate_json(self.raw(index, index + 1), context=CANONICAL)  # its own dumps

    def get(self, key: str) -> M | None:
        position = self._index.get(key)
        return None if position is None else self[position]

    def __iter__(self) -> Iterator[M]:
        step = 2000
        for start in range(0, len(self), step):
            yield from self[start : start + step]

    def __reduce__(self) -> tuple:
        """A spool is this process's: what crosses to another process (a task's parameters, a Dask
        worker) is a reference to staged files (raglake.pipeline.staging), never the records."""
        raise TypeError("a Spool of records is process-local: pass references to staged batches instead")
