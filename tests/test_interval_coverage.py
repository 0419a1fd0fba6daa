"""Issue 14, item 2: compare_runs' paired interval (the inversion of the paired sign-flip test, see
sql/compare_runs.sql) covers the true difference 95% of the time, within ±2.5 points, for n ≥ 30 on
seeded simulations of a 0/1 metric, a continuous 0-1 one, and the two discrete kinds raglake scores
most (1/rank, 0-5 judge scores); every replicate is a slice of one comparison run by the SQL itself.
NOTES.md has the table for small n and the other methods measured (benchmarks/interval_coverage.py)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.pairkit import PairedComparison, binary, judge_like, mrr_like, similarity_like

REPLICATES = 1500  # Monte Carlo standard error of a 95% coverage: 0.56 points
CALIBRATED = [binary(0.10, 0.20), similarity_like(), mrr_like(), judge_like()]


@pytest.fixture(scope="module")
def pairs() -> PairedComparison:
    return PairedComparison()


@pytest.mark.parametrize("n", [30, 100])
@pytest.mark.parametrize("scenario", CALIBRATED, ids=[s.kind + ":" + s.name.split(",")[0] for s in CALIBRATED])
def test_coverage_is_95_percent_for_30_pairs_and_more(pairs, scenario, n):
    rng = np.random.default_rng([14, n, CALIBRATED.index(scenario)])
    rows = pairs.intervals(scenario.draw(rng, REPLICATES, n))
    assert len(rows) == REPLICATES and all(r["n_pairs"] == n for r in rows)
    covered = np.mean([r["ci_low"] <= scenario.delta <= r["ci_high"] for r in rows])
    assert abs(covered - 0.95) <= 0.025, f"{scenario.name}, n = {n}: coverage {covered:.3f}"
    # the interval excludes 0 exactly when the test's p-value is below 0.05
    assert all((r["ci_low"] > 0 or r["ci_high"] < 0) == (r["p_value"] < 0.05) for r in rows)


def test_too_few_pairs_give_an_unbounded_interval_and_no_verdict(pairs):
    """With n ≤ z² (3 pairs at 95%) no mean difference is rejected: the interval is unbounded (NULL)
    and p ≥ 0.05 whatever the values, even three identical differences."""
    rows = pairs.intervals(np.array([[1.0, 1.0, 1.0], [0.2, 0.5, 0.9]]), min_pairs=1)
    assert all(r["ci_low"] is None and r["ci_high"] is None and r["p_value"] >= 0.05 for r in rows)
    assert not any(r["regression_raw"] or r["improvement_raw"] for r in rows)
    [four] = pairs.intervals(np.ones((1, 4)), min_pairs=1)  # 4 > z²: all alike is the point [1, 1], p = 2Φ(-2)
    assert four["ci_low"] == four["ci_high"] == 1.0 and four["p_value"] == pytest.approx(0.0455, abs=1e-4)
