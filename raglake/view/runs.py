"""What the Runs and Run pages show, from the lake's SQL files (sql/run_list.sql, run_filters.sql, trend.sql,
metric_ci.sql, run_figures.sql, coverage.sql, worst_cases.sql) and the report's own gathering helpers."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from raglake.analysis import LakeQueries
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.metrics.registry import all_metrics
from raglake.report.data import headline_rows, run_info, worst_cases
from raglake.report.format import fold_unscored
from raglake.view.case import NotFound

MAX_RUNS = 200  # rows of the Runs page
MAX_SPARK_METRICS = 6  # headline metrics with a sparkline column on the Runs page
SPARK_W, SPARK_H, SPARK_PAD = 90.0, 22.0, 2.0
WORST_N = 10  # worst cases listed per metric on the Worst cases page (as the report's default --worst)
MAX_WORST_METRICS = 6
FILTERS = ("target", "dataset", "since", "until", "tag")


def _day(value: str | None, name: str) -> str | None:
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise ConfigError(f"{name} {value!r}: give a day as YYYY-MM-DD") from None


def run_filters(params: Mapping[str, str]) -> dict[str, str | None]:
    """The Runs page's filters from its query string: empty ones are None, days are checked."""
    chosen: dict[str, str | None] = {k: (params.get(k) or "").strip() or None for k in FILTERS}
    chosen["since"], chosen["until"] = _day(chosen["since"], "since"), _day(chosen["until"], "until")
    return chosen


def sparkline(values: Sequence[float | None]) -> dict[str, Any] | None:
    """An inline SVG polyline of a series (oldest first; the last point is the run's own): points scaled
    into the box, the last point apart; None for fewer than two values."""
    pts = [(i, v) for i, v in enumerate(values) if v is not None]
    if len(pts) < 2:
        return None
    low, high = min(v for _, v in pts), max(v for _, v in pts)
    span = (high - low) or 1.0
    step = (SPARK_W - 2 * SPARK_PAD) / max(len(values) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        y = SPARK_H - SPARK_PAD - (v - low) / span * (SPARK_H - 2 * SPARK_PAD) if high > low else SPARK_H / 2
        return round(SPARK_PAD + i * step, 1), round(y, 1)

    points = [xy(i, v) for i, v in pts]
    return {
        "w": SPARK_W,
        "h": SPARK_H,
        "points": " ".join(f"{x},{y}" for x, y in points),
        "last": points[-1],
        "low": low,
        "high": high,
        "n": len(pts),
    }


def _series(trend: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[tuple[Any, str, float | None]]]:
    """(target, dataset, metric) -> [(started_at, run_id, mean)], oldest first (trend.sql's order)."""
    out: dict[tuple[str, str, str], list[tuple[Any, str, float | None]]] = defaultdict(list)
    for r in trend:
        out[(r["target_name"], r["dataset_name"], r["metric"])].append((r["started_at"], r["run_id"], r["mean"]))
    return out


def spark_metrics(trend: list[dict[str, Any]], run_ids: set[str]) -> list[str]:
    """The registry's headline metrics with a mean in any of the listed runs, in its order (MAX_SPARK_METRICS)."""
    have = {r["metric"] for r in trend if r["run_id"] in run_ids and r["mean"] is not None}
    return [m.name for m in all_metrics(level="case") if m.headline and m.name in have][:MAX_SPARK_METRICS]


def runs_page(q: LakeQueries, params: Mapping[str, str]) -> dict[str, Any]:
    """The runs the filters keep, newest first, each with its headline metrics' means and a sparkline of
    each over its target's runs (same golden set) up to it."""
    chosen = run_filters(params)
    runs = run_query(q.con, "run_list", **chosen, limit=MAX_RUNS).to_pylist()
    options: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in run_query(q.con, "run_filters").to_pylist():
        options[r["kind"]].append(r)
    trend = q.trend(None, None, None, "all") if runs else []
    metrics = spark_metrics(trend, {r["run_id"] for r in runs})
    series = _series(trend)
    for run in runs:
        run["cells"] = {}
        for metric in metrics:
            points = series.get((run["target_name"], run["dataset_name"], metric), [])
            upto = [p for p in points if (p[0], p[1]) <= (run["started_at"], run["run_id"])]
            mean = upto[-1][2] if upto and upto[-1][1] == run["run_id"] else None
            run["cells"][metric] = {
                "mean": mean,
                "spark": sparkline([p[2] for p in upto]) if mean is not None else None,
            }
    return {"runs": runs, "filters": chosen, "options": options, "metrics": metrics, "limit": MAX_RUNS}


def _breakdown(q: LakeQueries, run_id: str, by: str, metrics: list[str]) -> dict[str, Any]:
    """One dimension of the run: {slices: [slice], cells: {(slice, metric): metric_ci row}}, the listed metrics."""
    out: dict[str, Any] = {"slices": [], "cells": {}}
    for r in q.metric_ci(run_id, by):
        if r["metric"] in metrics:
            if r["slice"] not in out["slices"]:
                out["slices"].append(r["slice"])
            out["cells"][(r["slice"], r["metric"])] = r
    return out


def dimensions(q: LakeQueries, run_id: str, by: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """The run's dimensions (sql/slice_dimensions.sql: the built-in ones, then its eval file's meta.* ones) and
    the one shown: `by`, else the first (category where the run has it)."""
    found = run_query(q.con, "slice_dimensions", run_id=run_id).to_pylist()
    names = [d["dimension"] for d in found]
    if by is not None and by not in names:
        raise NotFound(f"run {run_id} has no dimension {by!r}; it has {', '.join(names)}")
    return found, by or ("category" if "category" in names else (names[0] if names else None))


def run_page(q: LakeQueries, run_id: str, by: str | None = None) -> dict[str, Any]:
    """Everything the Run page shows about one run, its breakdown by `by` (default category)."""
    info = run_info(q, run_id)
    headline, unscored = headline_rows(q, run_id)
    have = {r["metric"] for r in headline}
    shown = [m.name for m in all_metrics(level="case") if m.headline and m.name in have] or sorted(have)
    others = [r for r in q.runs(MAX_RUNS) if r["run_id"] != run_id]
    found, by = dimensions(q, run_id, by)
    return {
        "run": info,
        "headline": headline,
        "unscored": unscored,
        "folded": fold_unscored(unscored),
        "missing": [r for r in headline if r["n_rows"] > r["n"]],
        "breakdown_metrics": shown,
        "directions": {r["metric"]: r["higher_is_better"] for r in headline},
        "dimensions": found,
        "by": by,
        "breakdown": _breakdown(q, run_id, by, shown) if by else None,
        "figures": [f for f in q.figures([run_id]) if f["metric"] != "stage_seconds"],
        "coverage": q.coverage(run_id),
        "previous": previous_run(q, info, others),
        "others": others,
    }


def previous_run(q: LakeQueries, info: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run to compare with first: the previous run of the same target and golden set (sql/previous_run.sql,
    what `raglake report` and the gate call the previous run), else the newest earlier run of any target on
    the same golden set; {run_id, target_name, same_target} or None."""
    same = q.previous_run(info["run_id"])
    if same is not None:
        return {"run_id": same, "target_name": info["target_name"], "same_target": True}
    earlier = [
        r
        for r in others
        if r["dataset_name"] == info["dataset_name"]
        and (r["started_at"], r["run_id"]) < (info["started_at"], info["run_id"])
    ]
    if not earlier:
        return None
    return {"run_id": earlier[0]["run_id"], "target_name": earlier[0]["target_name"], "same_target": False}


def worst_page(q: LakeQueries, run_id: str) -> dict[str, Any]:
    """The worst cases of the run's worst-case metrics (the report's sql/worst_cases.sql)."""
    have = set(q.scored_metrics([run_id]))
    chosen = [m.name for m in all_metrics(level="case") if m.worst_cases and m.name in have][:MAX_WORST_METRICS]
    return {"run": run_info(q, run_id), "worst": worst_cases(q, run_id, chosen, WORST_N), "n": WORST_N}
