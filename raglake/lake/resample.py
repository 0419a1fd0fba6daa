"""The bootstrap's resampling behind metric_ci (one run's slice means): seeded draws (splitmix64 of
(seed, group size, replicate); sql/views/05_resample_draws.sql writes the same draws out in SQL, as
their specification) and the resampled means, registered on every lake connection as the SQL function
`resample_means(groups DOUBLE[][], n_boot, seed) -> DOUBLE[][]` (raglake.lake.query.connect)."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# splitmix64's constants (sql/views/05_resample_draws.sql writes the same draws out in SQL)
_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_TILE = 1 << 21  # values gathered at once by resample_means (16 MiB of float64)
_SLAB = 1 << 15  # replicate x group sums added to at once
GROUPS_TYPE = duckdb.list_type(duckdb.list_type(duckdb.sqltypes.DOUBLE))  # resample_means' argument and result
_ARROW_GROUPS = pa.list_(pa.list_(pa.float64()))


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's output for every state in `x` (uint64, modulo 2^64)."""
    z = x + _GAMMA
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def resample_positions(n: int, seed: int, replicates: range, draws: range) -> np.ndarray:
    """0-based positions drawn from n values: row j - draws.start holds draw j of every replicate
    (columns), exactly as sql/views/05_resample_draws.sql defines them (its picks are these plus 1).
    `draws` must start at an even draw (two draws share one 64-bit word)."""
    if draws.start % 2 or not 0 < n < 2**32:
        raise ValueError(f"draws start at an even draw (not {draws.start}) from 1 to 2^32 - 1 values (not {n})")
    with np.errstate(over="ignore"):
        size_key = _splitmix64(_splitmix64(np.array([seed % 2**64], dtype=np.uint64)) ^ np.uint64(n))
        keys = _splitmix64(size_key ^ np.arange(replicates.start, replicates.stop, dtype=np.uint64))
        first, last = draws.start // 2, (draws.stop + 1) // 2
        words = _splitmix64(keys[None, :] + np.arange(first, last, dtype=np.uint64)[:, None] * _GAMMA)
    halves = np.empty((2 * len(words), len(keys)), dtype=np.uint64)
    np.right_shift(words, np.uint64(32), out=halves[0::2])
    np.bitwise_and(words, np.uint64(0xFFFFFFFF), out=halves[1::2])
    halves *= np.uint64(n)
    halves >>= np.uint64(32)
    return halves[: len(draws)].view(np.int64)  # every position < n < 2^32


def _size_means(values: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(groups, n_boot) resampled means of the rows of `values` (groups x n, one size n): each
    replicate's values summed one by one in draw order, then divided by n (list_sum(...) / n in SQL).
    Work goes in tiles of _TILE gathered values: a slab of (replicates x groups) sums, in draw blocks."""
    n_groups, n = values.shape
    by_draw = np.ascontiguousarray(values.T)  # row j: value j of every group
    means = np.empty((n_groups, n_boot))
    g_step = min(n_groups, _SLAB)
    r_step = min(n_boot, max(1, _SLAB // g_step))
    j_step = max(2, _TILE // (g_step * r_step) // 2 * 2)
    for g0 in range(0, n_groups, g_step):
        chunk = np.ascontiguousarray(by_draw[:, g0 : g0 + g_step])
        for r0 in range(0, n_boot, r_step):
            reps = range(r0, min(n_boot, r0 + r_step))
            sums = np.zeros((len(reps), chunk.shape[1]))
            for j0 in range(0, n, j_step):
                positions = resample_positions(n, seed, reps, range(j0, min(n, j0 + j_step)))
                tile = np.take(chunk, positions, axis=0)  # draw, replicate, group (take: 5x faster than indexing)
                for drawn in tile:
                    sums += drawn
            means[g0 : g0 + g_step, reps.start : reps.stop] = (sums / n).T
    return means


def resample_means(groups: list[np.ndarray], n_boot: int, seed: int) -> list[np.ndarray]:
    """The n_boot bootstrap means of every group of values (float64 arrays, in a fixed order), with
    the draws of resample_positions; groups of the same size share them."""
    means: list[np.ndarray] = [np.empty(0)] * len(groups)
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    for n in np.unique(sizes[sizes > 0]).tolist():
        rows = np.flatnonzero(sizes == n)
        for row, row_means in zip(rows, _size_means(np.stack([groups[i] for i in rows]), max(n_boot, 0), seed)):
            means[row] = row_means
    return means


def resample_means_udf(groups: pa.ChunkedArray, n_boot: pa.ChunkedArray, seed: pa.ChunkedArray) -> pa.Array:
    """SQL `resample_means(groups DOUBLE[][], n_boot, seed) -> DOUBLE[][]`: per row, the n_boot
    bootstrap means of each of its groups (a NULL value counts as 0, as list_sum skips it)."""
    rows = groups.combine_chunks()
    out = []
    for i, (boots, seeds) in enumerate(zip(n_boot.to_pylist(), seed.to_pylist())):
        if not rows[i].is_valid or boots is None or seeds is None:
            out.append(pa.nulls(1, _ARROW_GROUPS))
            continue
        row = rows[i].values  # the row's groups: a ListArray over values shared with the other rows
        flat = pc.fill_null(row.values, 0.0).to_numpy(zero_copy_only=False)
        offsets = row.offsets.to_numpy()
        means = resample_means([flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])], boots, seeds)
        ends = np.cumsum([len(m) for m in means], dtype=np.int64)
        inner = pa.ListArray.from_arrays(
            pa.array(np.concatenate([[0], ends]), pa.int32()), np.concatenate([np.empty(0), *means])
        )
        out.append(pa.ListArray.from_arrays(pa.array([0, len(means)], pa.int32()), inner))
    return pa.concat_arrays(out) if out else pa.array([], _ARROW_GROUPS)
