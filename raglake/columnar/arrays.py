"""Small array helpers of the columnar path: lists flattened with their parents, per-group reductions."""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar.normalise import BulkProblem


def prefer_jemalloc() -> None:
    """Arrow's allocations from jemalloc, in this process and the processes it starts, unless the user chose a
    pool (ARROW_DEFAULT_MEMORY_POOL) or this pyarrow lacks jemalloc. For processes raglake owns (the command
    line): Arrow's default pool, mimalloc, kept ~230 MiB more at the peak of a 200k-case `raglake run` (962
    against 733 MiB; the system allocator 777), in the same time. A library caller's process is theirs."""
    if os.environ.get(POOL_VARIABLE):
        return
    try:
        pool = pa.jemalloc_memory_pool()
    except (AttributeError, NotImplementedError):  # a build without jemalloc (Windows wheels)
        return
    pa.set_memory_pool(pool)
    os.environ[POOL_VARIABLE] = "jemalloc"  # read by pyarrow in the children: the golden-set process, Dask workers


POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def import_pandas_early() -> threading.Thread:
    """Start pyarrow's one-time import of pandas in a daemon thread. pyarrow imports pandas on its first
    conversion of Python values (to recognise pandas' types): 0.35-0.45 s that a run would otherwise pay
    inside its first stage that reads columns (measured: the embedding stage's text collection of 300
    cases, 0.44-0.52 s with it, 0.09 s without). The command line starts it while Prefect's server starts."""
    thread = threading.Thread(target=pa.array, args=([0],), name="raglake-pandas-import", daemon=True)
    thread.start()
    return thread


def combine(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


class Elements:
    """The elements of a list-of-struct column, field by field: a field is gathered from the reader's
    blocks when asked for, so the others (a chunk's text) are never copied."""

    def __init__(self, chunks: list[pa.StructArray]):
        self._chunks = chunks

    def __len__(self) -> int:
        return sum(len(c) for c in self._chunks)

    def chunked(self, name: str) -> pa.ChunkedArray:
        return pa.chunked_array([c.field(name) for c in self._chunks], type=self._type(name))

    def field(self, name: str) -> pa.Array:
        return combine(self.chunked(name))

    def _type(self, name: str) -> pa.DataType:
        return self._chunks[0].type.field(name).type if self._chunks else pa.null()


def flat(col: pa.Array | pa.ChunkedArray, n: int) -> tuple[np.ndarray, np.ndarray, pa.Array | Elements]:
    """A list column's elements: (parent row, index within the parent, values — an Elements for structs);
    a null list is empty, a null element a BulkProblem."""
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    parents, values, at = [], [], 0
    for chunk in chunks:
        flattened = pc.list_flatten(chunk)
        if flattened.null_count:
            raise BulkProblem("a null element in a list")
        parents.append(np.asarray(pc.list_parent_indices(chunk), dtype=np.int64) + at)
        values.append(flattened)
        at += len(chunk)
    parent = np.concatenate(parents) if parents else np.zeros(0, np.int64)
    counts_ = np.bincount(parent, minlength=n)
    index = (np.arange(len(parent)) - (np.cumsum(counts_) - counts_)[parent]).astype(np.int32)
    value_type = col.type.value_type
    if pa.types.is_struct(value_type):
        return parent, index, Elements(values or [pa.array([], value_type)])
    return parent, index, combine(pa.chunked_array(values, type=value_type))


def counts(parent: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(parent, minlength=n).astype(np.int64)


def group_any(parent: np.ndarray, flags: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(parent[flags], minlength=n) > 0


def group_min(parent: np.ndarray, values: np.ndarray, n: int, empty: float) -> np.ndarray:
    out = np.full(n, empty, dtype=np.float64)
    np.minimum.at(out, parent, values)
    return out


def group_starts(parent: np.ndarray, n: int) -> np.ndarray:
    """Offsets of each group in `parent` (sorted by group): n + 1 values."""
    return np.concatenate([[0], np.cumsum(np.bincount(parent, minlength=n))]).astype(np.int64)


def to_numpy(arr: pa.Array | pa.ChunkedArray, fill: object, dtype: type) -> np.ndarray:
    return np.asarray(pc.fill_null(combine(arr), fill).to_numpy(zero_copy_only=False), dtype=dtype)


def list_array(parent: np.ndarray, values: pa.Array, n: int) -> pa.ListArray:
    """A list per row 0..n-1 of the values whose parent is that row (values sorted by parent)."""
    offsets = pa.array(group_starts(parent, n).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values)
