"""compare_runs on a comparison of more than 200,000 pairs in all takes every slice's n, means and spread from one
streaming pass (compensated sums and Welford's variance) instead of a list of every pair: two runs of a million cases
held +4 GB of lists in the process that printed the comparison (NOTES, "Scale and speed"). The figures are the paired
test of compare_runs' header, computed here in plain Python with exact sums, on both sides of that boundary; a
constant difference has no spread, and a slice where no case changed says so."""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest

from tests.pairkit import PairedComparison

# comparison -> (cases, slice -> its first n cases): 4 metrics x 35,300 = 141,200 pairs (lists), 4 x 160,301 (streaming)
SIZES = {
    "lists": (20_000, {"all": 20_000, "small": 300, "edge": 15_000}),
    "streaming": (60_000, {"all": 60_000, "small": 300, "edge": 50_000, "over": 50_001}),
}


def _reference(d: np.ndarray, a: np.ndarray, b: np.ndarray, c: float) -> dict[str, float | None]:
    """The header's figures with exact rational sums (no rounding but the last): n, means, diff, p, interval."""
    n = len(d)
    exact = [Fraction(float(x)) for x in d]
    m = sum(exact) / n
    s2 = sum((x - m) ** 2 for x in exact) / n
    sum_sq = sum(x * x for x in exact)
    p = math.erfc(abs(float(sum(exact))) / math.sqrt(float(sum_sq)) / math.sqrt(2)) if sum_sq else 1.0
    half = c * math.sqrt(float(s2) / (n - c * c))
    return {
        "n_pairs": n,
        "mean_a": float(sum(Fraction(float(x)) for x in a) / n),
        "mean_b": float(sum(Fraction(float(x)) for x in b) / n),
        "diff": float(m),
        "p_value": p,
        "ci_low": float(m) - half,
        "ci_high": float(m) + half,
    }


@pytest.fixture(scope="module", params=list(SIZES))
def rows(request) -> dict[tuple[str, str], dict]:
    n, slices = SIZES[request.param]
    rng = np.random.default_rng(29)
    a = np.vstack([rng.random(n), rng.integers(0, 2, n).astype(float), np.full(n, 0.5), rng.random(n)])
    b = np.vstack([a[0] + rng.normal(0.004, 0.2, n), rng.integers(0, 2, n).astype(float), a[2] + 0.25, a[3]])
    metrics = [("cont", True), ("binary", True), ("shifted", True), ("same", True)]
    found = PairedComparison().compare(a, b, [("tag", name, np.arange(k)) for name, k in slices.items()], metrics)
    return {(r["metric"], r["slice"]): r | {"_a": a, "_b": b, "_n": k} for r in found for k in [slices[r["slice"]]]}


@pytest.mark.parametrize("metric", ["cont", "binary"])
def test_every_slice_is_the_paired_test_of_the_header_on_both_sides_of_the_boundary(rows, metric) -> None:
    i = ["cont", "binary", "shifted", "same"].index(metric)
    for (name, _), row in rows.items():
        if name != metric:
            continue
        a, b = row["_a"][i][: row["_n"]], row["_b"][i][: row["_n"]]
        want = _reference(b - a, a, b, NormalDist().inv_cdf(0.975))
        assert row["n_pairs"] == want["n_pairs"]
        for key in ("mean_a", "mean_b", "diff", "ci_low", "ci_high"):
            assert math.isclose(row[key], want[key], rel_tol=1e-12, abs_tol=1e-15), (key, row[key], want[key])
        assert math.isclose(row["p_value"], want["p_value"], rel_tol=1e-9, abs_tol=1e-300)


def test_a_constant_difference_has_no_spread_and_an_unchanged_metric_says_so(rows) -> None:
    for (name, slice_), shifted in rows.items():
        if name != "shifted":
            continue
        same = rows[("same", slice_)]
        assert shifted["diff"] == 0.25 and shifted["ci_low"] == shifted["ci_high"] == 0.25
        assert shifted["verdict"] == "better"
        assert same["diff"] == 0 and same["verdict"] == "no clear change" and same["why"] == "no case changed"


def test_a_slice_of_a_million_pairs_is_compared_within_64_mb_of_duckdb_memory() -> None:
    """The streaming pass spills what does not fit (the join); the lists of every pair could not: with them this
    comparison is an OutOfMemoryException at 64 MB."""
    rng = np.random.default_rng(7)
    a = rng.random((1, 1_000_000))
    b = a + rng.normal(0.001, 0.1, a.shape)
    (row,) = PairedComparison(memory_limit="64MB").compare(a, b, [("tag", "all", np.arange(a.shape[1]))], [("m", True)])
    assert row["n_pairs"] == 1_000_000
    assert math.isclose(row["diff"], float(np.mean(b[0] - a[0])), rel_tol=1e-9)


def test_many_medium_slices_of_a_large_comparison_are_compared_within_64_mb() -> None:
    """The rule is the comparison's size, not each slice's: 600,000 cases with twenty slices of 30,000 each held
    all their pairs in lists (an OutOfMemoryException at 64 MB) when only a slice over 50,000 pairs streamed."""
    rng = np.random.default_rng(8)
    n = 600_000
    a = rng.random((1, n))
    b = a + rng.normal(0.001, 0.1, a.shape)
    slices = [("tag", "all", np.arange(n))] + [
        ("tag", f"s{i:02d}", np.arange(i * 30_000, (i + 1) * 30_000)) for i in range(20)
    ]
    rows = PairedComparison(memory_limit="64MB").compare(a, b, slices, [("m", True)])
    assert sorted(r["n_pairs"] for r in rows) == [30_000] * 20 + [n]
    for r in rows:
        cases = (
            slice(None)
            if r["slice"] == "all"
            else slice(int(r["slice"][1:]) * 30_000, (int(r["slice"][1:]) + 1) * 30_000)
        )
        assert math.isclose(r["diff"], float(np.mean(b[0][cases] - a[0][cases])), rel_tol=1e-9)
