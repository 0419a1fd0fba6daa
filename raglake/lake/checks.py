"""What makes a lake file readable: a Parquet footer that parses and the columns of its table (by name and
type, older layouts included: raglake.lake.layouts), checked once per file version (path, size, mtime);
which run a damaged file takes out with it; the check that a lake path is usable at all; and the one
warning line each damaged file gets.

A damaged file that is one of a run's own files (`<run_id>.parquet` or a scoring's `s-<12 hex>.parquet` in
its partitions, or its `runs` row) means the run is missing rows: readers leave that run out whole, so no
mean is ever computed over part of a run. Any other damaged or foreign file in a partition adds nothing to
a run: readers skip that file alone. `raglake doctor --quarantine` (raglake.lake.doctor) moves them aside."""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from raglake.errors import LakeError
from raglake.lake.layouts import CONVERTED, RENAMED
from raglake.lake.tables import TABLES

QUARANTINE_HINT = "raglake doctor --quarantine moves it aside"
SCORING_STEM = re.compile(r"s-[0-9a-f]{12}")
UNITS = {"run_id": "run", "metaeval_id": "meta-evaluation"}  # partitions whose files make up one whole
_PARALLEL_FROM = 16  # footers of more files than this are read on threads (a remote lake's latency)
_VERDICTS: dict[str, tuple[tuple, str | None]] = {}  # path -> (its size and mtime when checked, the problem)
_WARNED: set[str] = set()
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Damage:
    """A file readers leave out: where, why, and the run (or meta-evaluation) left out with it, if any."""

    path: str
    table: str
    reason: str
    unit: str | None = None  # the partition value (run id, metaeval id) whose rows are incomplete without it

    @property
    def unit_column(self) -> str:
        return "run_id" if self.table == "runs" else TABLES[self.table].partition

    def line(self) -> str:
        if self.unit is None:
            return f"{self.path}: {self.reason}; skipped ({QUARANTINE_HINT})"
        what = UNITS.get(self.unit_column, "partition")
        return f"{self.path}: {self.reason}; {what} {self.unit} is left out ({QUARANTINE_HINT})"


def warn(line: str) -> None:
    """One warning line on stderr (stdout stays the command's answer), once per process."""
    with _LOCK:
        if line in _WARNED:
            return
        _WARNED.add(line)
    print(f"warning: {line}", file=sys.stderr, flush=True)


def report(damaged: Iterable[Damage]) -> dict[str, set[str]]:
    """Warn once for each damaged file; the units left out, by partition column (`run_id` -> run ids)."""
    left_out: dict[str, set[str]] = {}
    for d in damaged:
        warn(d.line())
        if d.unit is not None:
            left_out.setdefault(d.unit_column, set()).add(d.unit)
    return left_out


def check_lake_root(root: str | Path, *, write: bool = False) -> None:
    """Raise one clear LakeError when `root` (a local lake folder; other URLs are not checked) cannot be a
    lake: it exists and is not a folder (a file, /dev/null), or, with `write`, the folder (or the nearest
    folder above it, where it does not exist yet) is read-only. A missing lake is fine: it is created by
    its first run, and reads of it find no runs."""
    check_folder(root, "the lake", "give --lake a folder (it is created when missing)", write=write)


def check_folder(root: str | Path, name: str, fix: str, *, given: str = "", write: bool = False) -> None:
    """check_lake_root's checks for any local folder raglake writes (the lake, the results location): `name`
    says which, `fix` how to give another, `given` (after the path) where it was given."""
    text = str(root).removeprefix("file://")
    if "://" in text:
        return
    path = Path(text)
    if path.exists() and not path.is_dir():
        kind = "a file" if path.is_file() else "not a regular folder (a device or a socket)"
        raise LakeError(f"{name} {path} is {kind}: {fix}")
    if not write:
        return
    above = next((p for p in (path, *path.absolute().parents) if p.exists()), None)
    if above is None or not above.is_dir():
        raise LakeError(f"{name} {path}{given} cannot be created: {above} is not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise LakeError(f"{name} {path}{given} cannot be written: {above} is read-only")


def own_unit(table: str, path: str) -> str | None:
    """The run (or meta-evaluation) whose own file `path` is, by its place and name: a runs file commits
    the run it is named after; in a run's partition, raglake names its files `<run_id>.parquet` and
    `s-<12 hex>.parquet` (a scoring). None for any other file (a foreign one, or a judge_calls file)."""
    folder, name = path.replace("\\", "/").rsplit("/", 2)[-2:]
    stem = name.removesuffix(".parquet")
    if table == "runs":
        return stem
    column, _, value = folder.partition("=")
    if column in UNITS and (stem == value or SCORING_STEM.fullmatch(stem)):
        return value
    return None


def expected_types(table: str) -> dict[str, pa.DataType]:
    """Column -> type a file of `table` may hold: the current columns and those of older layouts."""
    types = {f.name: f.type for f in TABLES[table].schema}
    for old, new in RENAMED.get(table, {}).items():
        types[old] = types[new]
    for old, _ in CONVERTED.get(table, {}).values():
        types[old] = pa.string()  # a JSON string column that a typed one replaced
    return types


def schema_problem(table: str, schema: pa.Schema) -> str | None:
    """Why a file with `schema` is not one of `table`'s files (None: it is, in this or an older layout)."""
    types = expected_types(table)
    if not schema.names:
        return "it has no columns"
    for field in schema:
        want = types.get(field.name)
        if want is None:
            return f"column {field.name!r} is not a column of the {table} table (a file of another schema)"
        if not field.type.equals(want):
            return f"column {field.name!r} is {field.type}, the {table} table's is {want}"
    return None


def parquet_reason(e: BaseException) -> str:
    """A short reason for a Parquet reader's error."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "magic bytes not found" in text:
        return "not a Parquet file or cut short (no Parquet footer at its end)"
    if "size is 0 bytes" in text:
        return "empty file (0 bytes)"
    return f"unreadable Parquet: {text[:200]}"


def partition_problem(table: str, path: str) -> str | None:
    """A date partition folder whose value is no date (readers would type the whole column as text)."""
    spec = TABLES[table]
    if spec.partition_type != pa.date32():
        return None
    value = path.replace("\\", "/").rsplit("/", 2)[-2].partition("=")[2]
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return f"its folder {spec.partition}={value} is not a date"
    return None


def footer_problem(fs: Any, table: str, path: str, info: dict[str, Any], *, local: bool) -> str | None:
    """Why the file at `path` cannot be read as one of `table`'s files, from its size, footer and
    schema; None when it can. Remembered for the file's (size, mtime), so a process checks it once."""
    stamp = (info.get("size"), info.get("mtime") or info.get("LastModified") or info.get("created"), info.get("ETag"))
    with _LOCK:
        known = _VERDICTS.get(path)
    if known is not None and known[0] == stamp:
        return known[1]
    problem = _footer_problem(fs, table, path, info, local)
    with _LOCK:
        _VERDICTS[path] = (stamp, problem)
    return problem


def _footer_problem(fs: Any, table: str, path: str, info: dict[str, Any], local: bool) -> str | None:
    if info.get("type") == "directory":
        return "a folder where a Parquet file belongs"
    if not info.get("size"):
        return "empty file (0 bytes)"
    problem = partition_problem(table, path)
    if problem:
        return problem
    try:
        if local:
            schema = pq.read_schema(path)
        else:
            with fs.open(path, "rb") as f:
                schema = pq.read_schema(f)
    except (pa.ArrowException, OSError, ValueError) as e:
        return parquet_reason(e)
    return schema_problem(table, schema)


def survey(fs: Any, table: str, found: dict[str, dict[str, Any]], *, local: bool) -> tuple[list[str], list[Damage]]:
    """Of a table's files (path -> fsspec info): the sound ones, and the damaged ones with their reasons."""
    paths = sorted(found)

    def check(p: str) -> str | None:
        return footer_problem(fs, table, p, found[p], local=local)

    if len(paths) > _PARALLEL_FROM and not local:
        with ThreadPoolExecutor(max_workers=16) as pool:
            problems = list(pool.map(check, paths))
    else:
        problems = [check(p) for p in paths]
    sound = [p for p, problem in zip(paths, problems) if problem is None]
    damaged = [Damage(p, table, problem, own_unit(table, p)) for p, problem in zip(paths, problems) if problem]
    return sound, damaged


def deep_problem(fs: Any, table: str, path: str, info: dict[str, Any], *, local: bool) -> str | None:
    """footer_problem, then every row group read and decoded (what `raglake doctor` checks: a page
    damaged behind a sound footer is found only by reading it)."""
    problem = _footer_problem(fs, table, path, info, local)
    if problem:
        return problem
    try:
        with fs.open(path, "rb") as f:
            parquet = pq.ParquetFile(f)
            for i in range(parquet.metadata.num_row_groups):
                parquet.read_row_group(i)
    except (pa.ArrowException, OSError, ValueError) as e:
        return f"its data cannot be read: {parquet_reason(e).removeprefix('unreadable Parquet: ')}"
    return None
