"""Coverage of paired-difference intervals by seeded simulation, and the false discovery rate control
under a complete null: what issue 14 chose compare_runs' interval and test from.

    python benchmarks/interval_coverage.py [--reps 2000] [--boot 1000] [--null-sims 200] [--quick]

Part 1, coverage: for every scenario of tests/pairkit.py (paired differences whose true mean δ is
known exactly: 0/1 metrics with 20%, 30% and 10% of the pairs differing, a continuous 0-1 score, a
strongly skewed continuous difference, 1/rank and 0-5 judge scores with case effects) and n = 5, 10,
30, 100 pairs, --reps seeded replicates; the share of 95% intervals that contain δ, for
  shipped      compare_runs itself (through its SQL): the interval inverting the paired sign-flip test,
               m ± z·s/√(n - z²)
  percentile   the percentile bootstrap over raglake's seeded draws, --boot resamples (compare_runs
               before issue 14; metric_ci's method)
  BCa          scipy.stats.bootstrap(method="BCa"), --boot resamples
  boot-t       the studentised bootstrap (bootstrap-t) over raglake's seeded draws, --boot resamples
  t            Student's t interval, m ± t(n-1)·sd/√n
A replicate whose resamples are all equal (every difference alike) gets the point interval [m, m].
Monte Carlo standard error of a 95% coverage: √(0.95·0.05/reps) (0.49 points at 2,000).

Part 2, complete null: two runs of one system (per-case difficulty, A and B drawn alike; 40 metrics of
four kinds over the sample golden set's slices: 960 metric × slice tests of at least 5 pairs), --null-sims
seeded comparisons: the share of comparisons in which anything is flagged, by the shipped FDR-controlled
verdicts, by the uncorrected per-slice flags, and by Benjamini-Hochberg over Student-t p-values.
Nothing here asserts; tests/test_interval_coverage.py and tests/test_fdr.py do.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
import warnings

import numpy as np
from _common import ROOT

sys.path.insert(0, str(ROOT))

from scipy import stats  # noqa: E402

from raglake.lake.resample import resample_means  # noqa: E402
from tests.pairkit import SCENARIOS, PairedComparison, null_runs, sample_slices  # noqa: E402

SIZES = (5, 10, 30, 100)
METHODS = ("shipped", "percentile", "BCa", "boot-t", "t")


def _point_if_nan(low: np.ndarray, high: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.where(np.isnan(low), m, low), np.where(np.isnan(high), m, high)


def bootstrap_intervals(d: np.ndarray, n_boot: int, seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Percentile and bootstrap-t intervals of every row of d over raglake's seeded draws."""
    reps, n = d.shape
    means = np.stack(resample_means(list(d), n_boot, seed))  # (reps, n_boot)
    squares = np.stack(resample_means(list(d * d), n_boot, seed))  # the same draws
    m, sd = d.mean(axis=1), d.std(axis=1, ddof=1)
    low, high = np.quantile(means, [0.025, 0.975], axis=1)
    sd_star = np.sqrt(np.maximum(squares - means**2, 0.0) * n / (n - 1))
    shift = means - m[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = shift / (sd_star / math.sqrt(n))
        # a resample of identical values has no spread: its t is 0 at the mean and ±inf elsewhere
        t_star = np.where(sd_star > 0, t_star, np.where(shift > 0, np.inf, np.where(shift < 0, -np.inf, 0.0)))
        t_low, t_high = np.quantile(t_star, [0.025, 0.975], axis=1, method="inverted_cdf")  # no inf - inf
        boot_t = m - t_high * sd / math.sqrt(n), m - t_low * sd / math.sqrt(n)
    return {"percentile": (low, high), "boot-t": _point_if_nan(*boot_t, m)}


def bca_intervals(d: np.ndarray, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate replicates (all alike) give NaN, handled below
        ci = stats.bootstrap(
            (d,), np.mean, axis=-1, vectorized=True, n_resamples=n_boot, batch=100, method="BCa", rng=seed
        ).confidence_interval
    return _point_if_nan(ci.low, ci.high, d.mean(axis=1))


def t_intervals(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = d.shape[1]
    half = stats.t.ppf(0.975, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    return d.mean(axis=1) - half, d.mean(axis=1) + half


def coverage(pairs: PairedComparison, reps: int, n_boot: int) -> None:
    print(
        f"coverage of 95% intervals, {reps} replicates per cell (Monte Carlo SE {100 * math.sqrt(0.0475 / reps):.2f})"
    )
    print(f"{'scenario':<52}{'n':>4}" + "".join(f"{m:>11}" for m in METHODS))
    for k, scenario in enumerate(SCENARIOS):
        for n in SIZES:
            d = scenario.draw(np.random.default_rng([2026, k, n]), reps, n)
            rows = pairs.intervals(d)
            shipped = (  # unbounded (NULL) when n <= z²
                np.array([-np.inf if r["ci_low"] is None else r["ci_low"] for r in rows]),
                np.array([np.inf if r["ci_high"] is None else r["ci_high"] for r in rows]),
            )
            found = {"shipped": shipped, **bootstrap_intervals(d, n_boot, seed=k), "t": t_intervals(d)}
            found["BCa"] = bca_intervals(d, n_boot, seed=k)
            cells = ""
            for method in METHODS:
                low, high = found[method]
                covered = np.mean((low <= scenario.delta) & (scenario.delta <= high))
                cells += f"{100 * covered:>10.1f}%"
            print(f"{scenario.name:<52}{n:>4}{cells}", flush=True)


def t_test_p(d: np.ndarray) -> float:
    """Student's paired t-test p-value (0 when every difference is alike and not 0)."""
    sd, m = d.std(ddof=1), d.mean()
    if sd == 0:
        return 1.0 if m == 0 else 0.0
    return float(2 * stats.t.sf(abs(m) / (sd / math.sqrt(len(d))), len(d) - 1))


def complete_null(pairs: PairedComparison, sims: int) -> None:
    slices = sample_slices()
    metrics = [(f"m{i:02d}", True) for i in range(40)]
    rng = np.random.default_rng(20261123)
    fdr_any = raw_any = t_any = raw_total = 0
    for _ in range(sims):
        a, b = null_runs(rng, len(metrics), 66)
        rows = pairs.compare(a, b, slices, metrics)
        fdr_any += any(r["regression"] or r["improvement"] for r in rows)
        raw = sum(r["regression_raw"] or r["improvement_raw"] for r in rows)
        raw_any, raw_total = raw_any + (raw > 0), raw_total + raw
        ps = [t_test_p(b[m, ix] - a[m, ix]) for m in range(len(metrics)) for _, _, ix in slices if len(ix) >= 5]
        t_any += bool((stats.false_discovery_control(ps) <= 0.05).any())
    n_tests = rows[0]["n_tests"]
    print(f"\ncomplete null: {sims} comparisons of two runs of one system, {n_tests} tests each")
    print(f"  FDR-controlled verdicts (shipped, q = 0.05): something flagged in {100 * fdr_any / sims:.1f}% of them")
    print(
        f"  uncorrected per-slice 95% flags: something flagged in {100 * raw_any / sims:.1f}%, "
        f"{raw_total / sims:.1f} flags per comparison"
    )
    print(f"  Benjamini-Hochberg over Student-t p-values: something flagged in {100 * t_any / sims:.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--null-sims", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="300 replicates, 50 null comparisons")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.null_sims = 300, 50
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load {os.getloadavg()}")
    started = time.perf_counter()
    pairs = PairedComparison()
    coverage(pairs, args.reps, args.boot)
    complete_null(pairs, args.null_sims)
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
