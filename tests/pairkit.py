"""compare_runs over synthetic paired values, without a lake on disk, and the seeded scenarios the
statistical tests and benchmarks/interval_coverage.py draw from.

`PairedComparison` opens the lake's own connection (views, macros, SQL functions) over an empty lake
and replaces `scores_latest`, `case_slices` and `metric_registry` with in-memory tables, so the SQL under test
is exactly what `raglake compare` runs. A scenario draws paired differences whose true mean is known
exactly (by construction or by enumerating a small discrete model), as (replicates, n) arrays."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from raglake.lake.query import connect, run_query
from raglake.lake.store import Lake

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "golden" / "sample.jsonl"


class PairedComparison:
    """compare_runs of run 'b' against run 'a' over values handed in as arrays."""

    def __init__(self, memory_limit: str | None = None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="raglake-pairs-")
        self.con = connect(Lake(self._folder.name), memory_limit=memory_limit)

    def compare(
        self,
        a: np.ndarray,
        b: np.ndarray,
        slices: Sequence[tuple[str, str, np.ndarray]],
        metrics: Sequence[tuple[str, bool | None]],
        **params: Any,
    ) -> list[dict[str, Any]]:
        """`a`, `b`: (metrics, cases) values of the two runs (NaN: not scored `ok`); `slices`: (dimension,
        slice, case indexes); `metrics`: (name, higher_is_better). params: compare_runs' own, with
        defaults alpha 0.05, min_pairs 5, fdr 0.05, tests None."""
        n_metrics, n_cases = a.shape
        values = np.stack([a, b]).ravel()  # run, metric, case
        ok = ~np.isnan(values)
        names = pa.array([m for m, _ in metrics])
        scores = pa.table(
            {
                "run_id": pa.DictionaryArray.from_arrays(np.repeat([0, 1], n_metrics * n_cases)[ok], ["a", "b"]),
                "case_id": np.tile(np.arange(n_cases), 2 * n_metrics)[ok],  # the lake's are strings; order alike
                "metric": pa.DictionaryArray.from_arrays(
                    np.tile(np.repeat(np.arange(n_metrics), n_cases), 2)[ok], names
                ),
                "value": values[ok],
                "status": pa.DictionaryArray.from_arrays(np.zeros(ok.sum(), dtype=np.int32), ["ok"]),
            }
        )
        slice_of = np.repeat(np.arange(len(slices)), [len(s[2]) for s in slices])
        sliced = pa.table(
            {
                "run_id": pa.DictionaryArray.from_arrays(np.zeros(len(slice_of), dtype=np.int32), ["b"]),
                "case_id": np.concatenate([s[2] for s in slices]).astype(np.int64),
                "dimension": pa.array([s[0] for s in slices]).take(slice_of),
                "slice": pa.DictionaryArray.from_arrays(slice_of, [s[1] for s in slices]),
            }
        )
        registry = pa.table(
            {
                "metric": [m for m, _ in metrics],
                "family": ["synthetic"] * len(metrics),
                "higher_is_better": pa.array([h for _, h in metrics], pa.bool_()),
                # an open scale: compare_runs clips no interval of these synthetic metrics
                "scale_min": pa.nulls(len(metrics), pa.float64()),
                "scale_max": pa.nulls(len(metrics), pa.float64()),
            }
        )
        for name, table in (("scores_latest", scores), ("case_slices", sliced), ("metric_registry", registry)):
            self.con.register(f"_{name}", table)
            self.con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM _{name}")
        params = {"alpha": 0.05, "min_pairs": 5, "fdr": 0.05, "tests": None, **params}
        return run_query(self.con, "compare_runs", run_a="a", run_b="b", **params).to_pylist()

    def intervals(self, d: np.ndarray, **params: Any) -> list[dict[str, Any]]:
        """compare_runs' row of every replicate (a row of `d`, (replicates, n) paired differences, B - A)
        as its own slice, in replicate order."""
        reps, n = d.shape
        a = np.zeros((1, reps * n))
        cases = np.arange(reps * n).reshape(reps, n)
        slices = [("tag", f"r{i:06d}", cases[i]) for i in range(reps)]
        rows = self.compare(a, d.reshape(1, -1), slices, [("d", True)], **params)
        return sorted(rows, key=lambda r: r["slice"])


# -- scenarios: paired differences with a known true mean ------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # binary | continuous | discrete
    delta: float  # the true mean difference
    draw: Callable[[np.random.Generator, int, int], np.ndarray]  # (rng, replicates, n) -> differences
    # (rng, case kinds 0-2) -> one run of A's distribution (the complete null draws B the same way)
    run: Callable[[np.random.Generator, np.ndarray], np.ndarray] | None = None


def binary(b10: float, b01: float) -> Scenario:
    """A 0/1 metric: a pair is (1, 0) with probability b10, (0, 1) with b01, tied otherwise: d = -1, 1, 0."""

    def draw(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
        u = rng.random((reps, n))
        return np.where(u < b10, -1.0, np.where(u < b10 + b01, 1.0, 0.0))

    share = b10 + b01
    return Scenario(f"0/1, {share:.0%} of pairs differ, δ = {b01 - b10:+.2f}", "binary", b01 - b10, draw)


def skewed(delta: float, scale: float) -> Scenario:
    """A continuous metric whose differences are skewed (skewness 2): d = δ + scale·(Exp(1) - 1)."""

    def draw(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
        return delta + scale * (rng.exponential(size=(reps, n)) - 1.0)

    return Scenario(f"continuous, skewed (exponential), δ = {delta:+.2f}", "continuous", delta, draw)


def similarity_like() -> Scenario:
    """A continuous 0-1 score (a cosine similarity, a sufficiency rate): cases of three kinds, each run's
    score Beta-distributed around the kind's level; B a little higher on the weak kinds."""
    beta_a = np.array([(8.0, 2.0), (4.0, 4.0), (2.0, 6.0)])  # (alpha, beta) per kind
    beta_b = np.array([(8.0, 2.0), (5.0, 4.0), (3.0, 6.0)])
    mean = lambda ab: ab[:, 0] / ab.sum(axis=1)  # noqa: E731
    delta = float(np.mean(mean(beta_b) - mean(beta_a)))

    def run(rng: np.random.Generator, kind: np.ndarray, ab: np.ndarray = beta_a) -> np.ndarray:
        return rng.beta(ab[kind, 0], ab[kind, 1])

    def draw(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
        kind = rng.integers(0, 3, size=(reps, n))
        a = run(rng, kind)
        return run(rng, kind, beta_b) - a

    return Scenario(f"continuous 0-1 (Beta), case effects, δ = {delta:+.3f}", "continuous", delta, draw, run)


def _discrete(name: str, kind: str, values: np.ndarray, probs_a: np.ndarray, probs_b: np.ndarray) -> Scenario:
    """Paired values from a latent case type t (rows of probs_*, uniform over types): given t, A and B
    are drawn independently from probs_a[t] and probs_b[t] over `values`. The true mean difference is
    enumerated exactly."""
    types = len(probs_a)
    delta = float(np.mean(probs_b @ values - probs_a @ values))

    def run(rng: np.random.Generator, t: np.ndarray, probs: np.ndarray = probs_a) -> np.ndarray:
        picked = (rng.random(t.shape)[..., None] > np.cumsum(probs, axis=1)[t]).sum(-1)
        return values[np.minimum(picked, len(values) - 1)]

    def draw(rng: np.random.Generator, reps: int, n: int) -> np.ndarray:
        t = rng.integers(0, types, size=(reps, n))
        a = run(rng, t)
        return run(rng, t, probs_b) - a

    return Scenario(f"{name}, δ = {delta:+.3f}", kind, delta, draw, run)


def mrr_like() -> Scenario:
    """1/rank of the first hit in the top 5 (0 when none): many zeros and ones, a few fractions; easy,
    medium and hard cases; B finds the hit more often and higher."""
    values = np.array([0.0, 1 / 5, 1 / 4, 1 / 3, 1 / 2, 1.0])
    # rows: easy, medium, hard cases; columns: miss, rank 5, 4, 3, 2, 1
    probs_a = np.array([[0.1, 0.05, 0.05, 0.1, 0.2, 0.5], [0.4, 0.1, 0.1, 0.1, 0.1, 0.2], [0.8] + [0.04] * 5])
    probs_b = np.array([[0.05, 0.05, 0.05, 0.05, 0.2, 0.6], [0.3, 0.1, 0.1, 0.1, 0.15, 0.25], [0.7] + [0.06] * 5])
    return _discrete("1/rank (MRR-like), case effects", "discrete", values, probs_a, probs_b)


def _scatter(quality: int, down: float, up: float) -> np.ndarray:
    """Probabilities over 0..5: quality - 1 with `down`, quality + 1 with `up` (clipped), else quality."""
    p = np.zeros(6)
    p[max(quality - 1, 0)] += down
    p[min(quality + 1, 5)] += up
    p[quality] += 1 - down - up
    return p


def judge_like() -> Scenario:
    """A 0-5 judge score: cases of quality 1, 3 or 5, each run's score scattered around it by -1..+1
    (clipped); B scores a little higher."""
    probs_a = np.array([_scatter(q, down=0.3, up=0.2) for q in (1, 3, 5)])
    probs_b = np.array([_scatter(q, down=0.2, up=0.35) for q in (1, 3, 5)])
    return _discrete("0-5 judge score, case effects", "discrete", np.arange(6, dtype=float), probs_a, probs_b)


SCENARIOS: tuple[Scenario, ...] = (
    binary(0.10, 0.10),
    binary(0.10, 0.20),
    binary(0.02, 0.08),
    similarity_like(),
    skewed(0.0, 0.2),
    skewed(0.05, 0.2),
    mrr_like(),
    judge_like(),
)


# -- a complete null: two runs from the same distribution -------------------------------------------


def sample_slices(n_cases: int | None = None) -> list[tuple[str, str, np.ndarray]]:
    """The slices of the bundled sample golden set (all, category, tag, difficulty, vault, answerable)
    as (dimension, slice, case indexes), the structure of a real comparison's family."""
    cases = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    members: dict[tuple[str, str], list[int]] = {}
    for i, case in enumerate(cases[:n_cases]):
        keys = [("all", "all"), ("category", case["category"]), ("difficulty", case["difficulty"])]
        keys += [("vault", case["vault"]), ("answerable", str(case.get("answerable", True)).lower())]
        keys += [("tag", tag) for tag in case.get("tags", [])]
        for key in keys:
            members.setdefault(key, []).append(i)
    return [(d, s, np.array(ix)) for (d, s), ix in members.items()]


def null_runs(rng: np.random.Generator, n_metrics: int, n_cases: int) -> tuple[np.ndarray, np.ndarray]:
    """(metrics, cases) values of two runs of one system: every case has its own difficulty, and given
    it A and B are drawn independently from the same distribution. Metrics cycle through 0/1, 0-1
    continuous, 1/rank and 0-5 kinds."""
    a, b = np.empty((n_metrics, n_cases)), np.empty((n_metrics, n_cases))
    kinds = (similarity_like(), mrr_like(), judge_like())
    for m in range(n_metrics):
        kind = m % 4
        if kind == 0:  # 0/1 with a per-case probability
            p = rng.beta(2.0, 2.0, size=n_cases)
            a[m], b[m] = rng.random(n_cases) < p, rng.random(n_cases) < p
            continue
        one_run = kinds[kind - 1].run
        assert one_run is not None
        case_kind = rng.integers(0, 3, size=n_cases)
        a[m], b[m] = one_run(rng, case_kind), one_run(rng, case_kind)
    return a, b
