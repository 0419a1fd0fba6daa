"""The agreement statistics against hand-computed values and scipy (a development dependency), and the
bootstrap: deterministic for a seed, clusters kept whole, undefined draws left out."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from raglake.metaeval import stats


def test_ranks_ties_and_correlations_agree_with_scipy() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 6, 80).astype(float)
    s = x + rng.normal(0, 2, 80).round(1)
    assert np.array_equal(stats.rankdata(x), sp.rankdata(x))
    assert stats.spearman(x, s) == pytest.approx(sp.spearmanr(x, s).statistic, abs=1e-12)
    assert stats.pearson(x, s) == pytest.approx(sp.pearsonr(x, s).statistic, abs=1e-12)
    assert np.isnan(stats.pearson([1, 1, 1], [1, 2, 3]))  # constant: undefined, not 0


def test_auroc_by_hand_and_against_mann_whitney() -> None:
    # positives 0.9, 0.4; negatives 0.4, 0.1: pairs (0.9>0.4) (0.9>0.1) (0.4=0.4: ½) (0.4>0.1) → 3.5 / 4
    assert stats.auroc([1, 1, 0, 0], [0.9, 0.4, 0.4, 0.1]) == pytest.approx(0.875)
    rng = np.random.default_rng(4)
    y = rng.random(200) < 0.3
    s = (rng.random(200) + 0.4 * y).round(2)
    u = sp.mannwhitneyu(s[y], s[~y]).statistic
    assert stats.auroc(y, s) == pytest.approx(u / (y.sum() * (~y).sum()))
    assert np.isnan(stats.auroc([1, 1], [0.2, 0.3]))  # one class only


def test_balanced_accuracy_accuracy_and_kappa_by_hand() -> None:
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    flag = np.array([1, 1, 0, 0, 0, 0, 1, 0])
    # TPR 2/3, TNR 4/5 → (2/3 + 4/5) / 2
    assert stats.balanced_accuracy(y, flag) == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert stats.accuracy(y, flag) == pytest.approx(6 / 8)
    # p_o = 6/8; p_e = P(y=1)P(f=1) + P(y=0)P(f=0) = 3/8·3/8 + 5/8·5/8 = 34/64
    assert stats.cohen_kappa(y, flag) == pytest.approx((6 / 8 - 34 / 64) / (1 - 34 / 64))


def test_bootstrap_is_deterministic_and_keeps_clusters_whole() -> None:
    rng = np.random.default_rng(5)
    y = rng.random(120) < 0.4
    s = rng.random(120) + 0.5 * y
    groups = np.repeat(np.arange(30), 4)
    a = stats.bootstrap_ci(stats.auroc, y, s, groups, resamples=300, seed=1)
    assert a == stats.bootstrap_ci(stats.auroc, y, s, groups, resamples=300, seed=1)
    assert a != stats.bootstrap_ci(stats.auroc, y, s, groups, resamples=300, seed=2)
    assert a[0] < stats.auroc(y, s) < a[1]
    # every draw takes 30 clusters with replacement, each whole: always 120 items
    seen = []
    stats.bootstrap_ci(lambda yy, ss: seen.append(len(yy)) or 0.0, y, s, groups, resamples=100, seed=0)
    assert set(seen) == {120}
    # draws where the statistic is undefined (one class) are left out; with half or more of them: no interval
    assert np.isnan(stats.bootstrap_ci(stats.auroc, [1, 0], [0.5, 0.4], [0, 1], resamples=200)[0])
