"""Agreement statistics in numpy (scipy is only a development dependency) and their bootstrap intervals.

Every statistic takes the human labels `y` and the metric's values `s` over the same items. The interval
is a percentile bootstrap over clusters (`groups`: the items that move together, e.g. one answer's
sentences or one pair's two annotations), with a fixed seed, so the same inputs give the same interval."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Statistic = Callable[[np.ndarray, np.ndarray], float]


def rankdata(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties sharing their average rank (as scipy.stats.rankdata)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    ordered = x[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(x)]
    average = (starts + ends + 1) / 2.0  # ranks start+1..end, averaged
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(average, ends - starts)
    return ranks


def auroc(y: np.ndarray, s: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties counting one half (Mann-Whitney U / n1·n0)."""
    y = np.asarray(y, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def balanced_accuracy(y: np.ndarray, flag: np.ndarray) -> float:
    """Mean of the true-positive rate and the true-negative rate."""
    y, flag = np.asarray(y, dtype=bool), np.asarray(flag, dtype=bool)
    if y.all() or not y.any():
        return float("nan")
    return float((flag[y].mean() + (~flag[~y]).mean()) / 2)


def accuracy(y: np.ndarray, pred: np.ndarray) -> float:
    return float((np.asarray(y) == np.asarray(pred)).mean())


def cohen_kappa(y: np.ndarray, pred: np.ndarray) -> float:
    """(p_o − p_e) / (1 − p_e) over the categories either side uses."""
    y, pred = np.asarray(y), np.asarray(pred)
    p_o = float((y == pred).mean())
    cats = np.union1d(y, pred)
    p_e = float(sum((y == c).mean() * (pred == c).mean() for c in cats))
    return float("nan") if p_e == 1 else (p_o - p_e) / (1 - p_e)


def _unit(x: np.ndarray) -> np.ndarray | None:
    """x centred and scaled to length 1, or None when x is constant. x is first divided by its largest
    magnitude, so that no sum or square can overflow whatever finite values it holds (a label of 1e308)."""
    big = np.abs(x).max(initial=0.0)
    if big == 0:
        return None
    d = x / big
    d = d - d.mean()
    norm = np.sqrt((d * d).sum())  # each |d| ≤ 2: the sum is at most 4·n
    return None if norm == 0 else d / norm


def pearson(y: np.ndarray, s: np.ndarray) -> float:
    """Pearson's r, computed so that it cannot overflow (a correlation does not change with the scale);
    NaN (undefined) for a constant side or a value that is not finite."""
    y, s = np.asarray(y, dtype=float), np.asarray(s, dtype=float)
    if not (np.isfinite(y).all() and np.isfinite(s).all()):
        return float("nan")
    uy, us = _unit(y), _unit(s)
    if uy is None or us is None:
        return float("nan")
    return float(np.clip((uy * us).sum(), -1.0, 1.0))


def spearman(y: np.ndarray, s: np.ndarray) -> float:
    """Pearson's r of the ranks (ties averaged); NaN where a value is not finite (it has no rank)."""
    y, s = np.asarray(y, dtype=float), np.asarray(s, dtype=float)
    if not (np.isfinite(y).all() and np.isfinite(s).all()):
        return float("nan")
    return pearson(rankdata(y), rankdata(s))


def bootstrap_ci(
    statistic: Statistic,
    y: np.ndarray,
    s: np.ndarray,
    groups: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of the statistic over `resamples` draws of whole clusters with replacement;
    draws where the statistic is undefined (e.g. one class only) are left out."""
    y, s = np.asarray(y), np.asarray(s)
    _, cluster = np.unique(np.asarray(groups), return_inverse=True)
    members = np.split(np.argsort(cluster, kind="stable"), np.cumsum(np.bincount(cluster))[:-1])
    rng = np.random.default_rng(seed)
    values = []
    for draw in rng.integers(0, len(members), size=(resamples, len(members))):
        rows = np.concatenate([members[c] for c in draw])
        value = statistic(y[rows], s[rows])
        if np.isfinite(value):
            values.append(value)
    if len(values) < resamples / 2:
        return float("nan"), float("nan")
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
