"""Agreement statistics at the edges of float64 (issue 25, item 9): a similarity label of 1e308 made
Pearson's sums of squares overflow, and `raglake metaeval` printed -0.000 with an interval (0.773 once the
labels were scaled). A correlation does not change when the labels are scaled, so the figures with 1e308
must be those of the scaled labels; a value that is not finite makes the figure undefined, with a reason;
and -0.000 is never printed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sp

from raglake.cli.metaeval_table import row_cells
from raglake.metaeval import stats
from raglake.metaeval.agreement import CaseScore, Settings, dataset_rows
from raglake.metaeval.items import LabelledItem
from raglake.metaeval.plan import item_cases
from raglake.metrics.registry import get_metric
from raglake.report.format import number, rounded

METRIC = get_metric("semantic_similarity")  # held against similarity labels


def _sample(n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    values = rng.random(n)
    labels = np.round(values * 4 + rng.normal(0, 1, n), 2)
    labels[0] = 1e308  # one person's finger on the key
    return labels, values


@pytest.mark.parametrize("scale", [1e-300, 1e-308, 1e-100])
def test_correlations_with_a_label_of_1e308_are_those_of_the_scaled_labels(scale: float) -> None:
    labels, values = _sample()
    scaled = labels * scale
    for statistic in (stats.pearson, stats.spearman):
        assert statistic(labels, values) == pytest.approx(statistic(scaled, values), rel=1e-12, abs=1e-15)
    assert stats.pearson(labels, values) == pytest.approx(sp.pearsonr(scaled, values).statistic, rel=1e-12)
    assert stats.spearman(labels, values) == pytest.approx(sp.spearmanr(labels, values).statistic, rel=1e-12)
    groups = np.arange(len(labels))
    low, high = stats.bootstrap_ci(stats.pearson, labels, values, groups, resamples=200)
    assert (low, high) == pytest.approx(stats.bootstrap_ci(stats.pearson, scaled, values, groups, resamples=200))


def test_every_label_near_the_float64_limit() -> None:
    labels, values = _sample()
    labels[0] = 1.0
    huge = np.abs(labels) * 1e307 + 1e307  # every one between 1e307 and 1e308: sums overflow, ranges do not
    huge[0] = 1.7e308
    reference = sp.pearsonr(huge / 1e307, values).statistic
    assert stats.pearson(huge, values) == pytest.approx(reference, rel=1e-12)
    assert stats.pearson(-huge, values) == pytest.approx(-reference, rel=1e-12)
    assert -1.0 <= stats.pearson(huge, huge * 0.5) <= 1.0 and stats.pearson(huge, huge * 0.5) == pytest.approx(1.0)


def test_values_that_are_not_finite_make_the_figure_undefined() -> None:
    labels, values = _sample()
    values[3] = math.inf
    assert math.isnan(stats.pearson(labels, values))
    assert math.isnan(stats.spearman(labels, values))
    assert math.isnan(stats.pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))  # constant: undefined, not 0


def _rows(labels: np.ndarray, values: np.ndarray) -> dict[str, dict]:
    items = [
        LabelledItem(id=f"i{i}", dataset="d", label_kind="similarity", label=float(label), answer=f"answer {i}")
        for i, label in enumerate(labels)
    ]
    scores = {
        (item_cases(item)[0][0], METRIC.name): CaseScore(float(v), "ok", None, METRIC.version, None, None)
        for item, v in zip(items, values)
    }
    rows = dataset_rows("d", items, [METRIC], scores, Settings(resamples=200, seed=0, common={}))
    return {r["statistic"]: r for r in rows if r["split"] == "all"}


def test_the_metaeval_rows_with_a_label_of_1e308_are_those_of_the_scaled_labels() -> None:
    labels, values = _sample()
    extreme, scaled = _rows(labels, values), _rows(labels * 1e-300, values)
    for statistic in ("pearson", "spearman"):
        for key in ("value", "ci_low", "ci_high"):
            assert extreme[statistic][key] == pytest.approx(scaled[statistic][key], rel=1e-12), (statistic, key)
        assert extreme[statistic]["status"] == "ok"
    assert extreme["pearson"]["value"] > 0.05  # what the sums' overflow turned into 0.0


def test_a_metric_value_that_is_not_finite_is_undefined_with_its_reason() -> None:
    labels, values = _sample()
    values[5] = math.inf
    for row in _rows(labels, values).values():
        assert row["value"] is None and row["status"] == "undefined"
        assert row["reason"] == "value_not_finite", row


@pytest.mark.parametrize("value", [-0.0, -0.0001, -0.00049])
def test_negative_zero_is_never_printed(value: float) -> None:
    assert number(value) == "0.000"
    assert number(value, thousands=True) == "0.000"
    assert math.copysign(1.0, rounded(value)) == 1.0
    row = {
        "dataset": "d",
        "split": "all",
        "n": 3,
        "metric": "m",
        "statistic": "pearson",
        "value": value,
        "ci_low": value,
        "ci_high": 0.5,
        "status": "ok",
        "reason": None,
        "n_failed": 0,
        "n_total": 3,
    }
    cells = row_cells(row)
    assert cells["figure"] == "0.000" and cells["95% CI"] == "[0.000, 0.500]", cells
    assert number(-0.0006) == "-0.001"  # a negative that rounds to a number keeps its sign
