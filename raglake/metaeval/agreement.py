"""Agreement of each metric with the people who labelled a data set: the `metaeval` table's rows.

Per data set, split (dev / heldout where the set has them, and all) and metric whose yardstick fits the
label kind:
- similarity: Spearman and Pearson of the value against the label;
- support: AUROC of the value for not_supported (a lower-is-better value as it is, a higher-is-better one
  negated), and the balanced accuracy of the metric's own decision where it makes one (≥ 95% of its values
  0 or 1: flagged = any unit flagged);
- correctness: AUROC for correct, and the balanced accuracy, accuracy and Cohen's κ of a decision (a
  CORRECT/WRONG/DON'T KNOW class counts as a decision for CORRECT, the other two as not correct);
- preference: Pearson of value(answer_b) − value(answer) against the label.
Items whose score is not `ok` are left out and counted (`n_failed`); a metric with no ok value keeps
its reason (e.g. `skipped`: no_judge), never a 0. Every row is landed: where a metric's values are all 0 or 1,
its AUROC is its balanced accuracy (TPR·(1 − FPR) + ½(TPR·FPR + (1 − TPR)(1 − FPR)) = ½(TPR + TNR)), and
sql/metaeval.sql marks that row as repeating it (`repeats`), so the CLI and the report show it once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from raglake.metaeval import stats
from raglake.metaeval.items import LABEL_KINDS, LabelledItem
from raglake.metaeval.plan import item_cases
from raglake.metrics.registry import Metric


@dataclass(frozen=True)
class CaseScore:
    value: float
    status: str
    reason: str | None
    version: str
    embedder: str | None
    judge_model: str | None


Scores = dict[tuple[str, str], CaseScore]  # (case id, metric) -> score


@dataclass(frozen=True)
class Settings:
    resamples: int
    seed: int
    common: dict[str, Any]  # columns every row shares (created_at, config_json, sample_seed, …)


def _decision(metric: Metric, values: np.ndarray, kind: str) -> np.ndarray | None:
    """The metric's own yes/no per item for the positive label (not supported; correct), when its values are
    0 or 1 (≥ 95% of them): a value at the metric's good end (1, or 0 when lower is better) says supported or
    correct, any other value flags it."""
    if values.size == 0:  # nothing to look at (e.g. a judge metric without a judge): a binary metric decides
        return _positive(metric, values, kind) if metric.scale == "binary" else None
    if metric.scale not in ("binary", "0-1") or np.isin(values, (0.0, 1.0)).mean() < 0.95:
        return None
    return _positive(metric, values, kind)


def _positive(metric: Metric, values: np.ndarray, kind: str) -> np.ndarray:
    good = values <= 0 if metric.higher_is_better is False else values >= 1
    return ~good if kind == "support" else good


def _oriented(metric: Metric, values: np.ndarray, kind: str) -> np.ndarray:
    """Values turned so that higher means what the positive label means (not supported; correct; b better)."""
    lower_better = metric.higher_is_better is False
    flip = (kind == "support") != lower_better
    return -values if flip else values


def _statistics(kind: str, metric: Metric, values: np.ndarray) -> dict[str, Callable | None]:
    """statistic name -> f(labels, metric values) over the ok items."""
    if kind == "similarity":
        return {"spearman": stats.spearman, "pearson": stats.pearson}
    if kind == "preference":
        return {"pearson": lambda y, s: stats.pearson(y, _oriented(metric, s, kind))}
    out: dict[str, Callable | None] = {"auroc": lambda y, s: stats.auroc(y, _oriented(metric, s, kind))}
    if _decision(metric, values, kind) is not None:

        def decided(y: np.ndarray, s: np.ndarray) -> np.ndarray:
            return _positive(metric, s, kind)  # a resample of a decision is still one

        out["balanced_accuracy"] = lambda y, s: stats.balanced_accuracy(y, decided(y, s))
        if kind == "correctness":
            out["accuracy"] = lambda y, s: stats.accuracy(y, decided(y, s))
            out["kappa"] = lambda y, s: stats.cohen_kappa(y.astype(int), decided(y, s).astype(int))
    return out


Value = float | tuple[str, str | None]  # the value, or (status, reason) where it is not ok


def _values(items: list[LabelledItem], metric: str, scores: Scores) -> list[Value]:
    """Per item: the metric's value (b − a for a preference item), or why there is none."""
    out: list[Value] = []
    for item in items:
        got = [scores.get((cid, metric)) for cid, _, _ in item_cases(item)]
        bad = [g for g in got if g is None or g.status != "ok"]
        if bad:
            out.append((bad[0].status, bad[0].reason) if bad[0] is not None else ("undefined", "not_scored"))
        else:
            out.append(got[-1].value - got[0].value if len(got) == 2 else got[0].value)
    return out


def _label(item: LabelledItem) -> float:
    return float(item.positive) if item.label_kind in ("support", "correctness") else float(item.label)


def dataset_rows(name: str, items: list[LabelledItem], metrics: list[Metric], scores: Scores, s: Settings) -> list:
    """The metaeval rows of one data set."""
    kind = items[0].label_kind
    splits = ["all"] + sorted({i.split for i in items} - {"all"})
    rows = []
    for metric in [m for m in metrics if LABEL_KINDS[kind] in m.yardsticks]:
        values = _values(items, metric.name, scores)
        seen = next((sc for (_, m), sc in scores.items() if m == metric.name and sc.status == "ok"), None)
        for split in splits:
            chosen = [(i, v) for i, v in zip(items, values) if split == "all" or i.split == split]
            rows.extend(_metric_rows(name, kind, split, metric, chosen, seen, s))
    return rows


def _metric_rows(
    name: str,
    kind: str,
    split: str,
    metric: Metric,
    chosen: list[tuple[LabelledItem, Value]],
    seen: CaseScore | None,
    s: Settings,
) -> list[dict[str, Any]]:
    ok = [(i, v) for i, v in chosen if not isinstance(v, tuple)]
    failed = Counter(v for _, v in chosen if isinstance(v, tuple))
    n_failed = len(chosen) - len(ok)
    y = np.array([_label(i) for i, _ in ok])
    v = np.array([val for _, val in ok], dtype=float)
    groups = np.array([i.cluster for i, _ in ok])
    base = dict(
        s.common,
        dataset=name,
        label_kind=kind,
        split=split,
        n=len(ok),
        n_positive=int(y.sum()) if kind in ("support", "correctness") else None,
        n_failed=n_failed,
        metric=metric.name,
        metric_version=metric.version,
        embedder=seen.embedder if seen else None,
        judge_model=seen.judge_model if seen else None,
    )
    if not ok:
        status, reason = _why_none(chosen, failed)
        return [
            dict(base, statistic=st, value=None, status=status, reason=reason) for st in _statistics(kind, metric, v)
        ]
    rows = []
    # a value that is not finite (inf, or b − a overflowing) has no correlation: said so, never a number
    undefined = "one_class_or_constant" if np.isfinite(v).all() and np.isfinite(y).all() else "value_not_finite"
    for statistic, fn in _statistics(kind, metric, v).items():
        value = fn(y, v)
        low, high = stats.bootstrap_ci(fn, y, v, groups, s.resamples, s.seed)
        status = "ok" if np.isfinite(value) else "undefined"
        rows.append(
            dict(
                base,
                statistic=statistic,
                value=float(value) if np.isfinite(value) else None,
                ci_low=low if np.isfinite(low) else None,
                ci_high=high if np.isfinite(high) else None,
                resamples=s.resamples,
                status=status,
                reason=None if status == "ok" else undefined,
                threshold=_threshold(metric, v) if statistic in ("balanced_accuracy", "accuracy", "kappa") else None,
            )
        )
    return rows


def _threshold(metric: Metric, values: np.ndarray) -> float:
    """The decision's boundary on the metric's value: flagged above 0 (lower is better), correct at 1."""
    return 0.0 if metric.higher_is_better is False else 1.0


def _why_none(chosen: list, failed: Counter) -> tuple[str, str]:
    """No ok value: the items' most common status and reason (skipped/no_judge, judge_error, …)."""
    if not chosen:
        return "undefined", "no_items"
    (status, reason), _ = failed.most_common(1)[0]
    return status, reason or status
