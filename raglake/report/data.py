"""Everything a report shows, gathered from the lake once (LakeQueries and the `sql/` files)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from raglake.analysis import DEFAULT_FDR, LakeQueries, verdict_summary
from raglake.errors import ConfigError
from raglake.lake.calls import drift_note, judge_drift
from raglake.lake.query import run_query
from raglake.metrics.registry import all_metrics, repeated

BREAKDOWN_DIMENSIONS = ("category", "tag", "difficulty", "answerable")
# the registry's headline metrics are charted by slice (grouped by family, under these titles) and its
# worst_cases metrics listed by worst case, when the run has `ok` values for them
CHART_TITLES = {"retrieval": "retrieval and abstention", "abstention": "retrieval and abstention"}
MAX_WORST_METRICS = 6
WORSENED_N = 3  # cases that got worse, per metric
MAX_FLAGGED = 200
NO_JUDGE_NOTE = (
    "{n} judge metric value(s) were skipped: no judge was configured for this run "
    "(raglake run --judge-base-url URL --judge-model NAME, or --judge local)."
)


def registry_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in the metric registry's order (as the CLI shows them; see raglake.cli.common)."""
    order = {m.name: i for i, m in enumerate(all_metrics())}
    return sorted(rows, key=lambda r: order.get(r["metric"], len(order)))


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


@dataclass
class Comparison:
    baseline: dict[str, Any]
    overall: list[dict[str, Any]]  # compare_runs rows of dimension 'all', registry order
    flagged: list[dict[str, Any]]  # slice rows the verdicts call a regression or an improvement, regressions first
    n_flagged: int  # before the MAX_FLAGGED cut
    n_regressed: int  # slices that regressed, before the cut
    index_changed: bool
    fdr: float | None = DEFAULT_FDR  # the verdicts' false discovery rate (None: uncorrected, --fdr off)
    n_tests: int = 0  # the metric × slice tests of the comparison (the family of the FDR control)
    n_raw: int = 0  # slice rows whose own 95% interval excludes 0 (uncorrected), for comparison
    summary: str = ""  # analysis.verdict_summary: tests made, real differences, uncorrected ones


@dataclass
class ReportData:
    run: dict[str, Any]  # sql/run_info.sql
    headline: list[dict[str, Any]]  # metrics with ok values: metric_ci (all) + breakdown status counts
    unscored: list[dict[str, Any]]  # case-level metrics with no ok value in the run, and why
    slices: dict[str, list[dict[str, Any]]]  # dimension -> metric_ci rows
    chart_groups: dict[str, list[str]]  # group title -> the metrics of the group the run has values for
    figures: list[dict[str, Any]]  # sql/run_figures.sql
    coverage: list[dict[str, Any]]  # sql/coverage.sql
    worst: dict[str, list[dict[str, Any]]]  # metric -> sql/worst_cases.sql rows
    worst_n: int
    comparison: Comparison | None = None
    # with a baseline: metric -> sql/worsened_cases.sql rows (both answers), metrics that regressed overall first
    worsened: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    baseline_slices: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # the baseline's metric_ci rows
    notes: list[str] = field(default_factory=list)
    # the lake's latest meta-evaluation (sql/metaeval.sql), splits all and heldout: how far its metrics
    # agree with people
    metaeval: list[dict[str, Any]] = field(default_factory=list)
    generated_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    @property
    def metric_info(self) -> dict[str, dict[str, Any]]:
        return {r["metric"]: r for r in self.headline}


def run_info(q: LakeQueries, run_id: str) -> dict[str, Any]:
    rows = run_query(q.con, "run_info", run_ids=[run_id]).to_pylist()
    if not rows:
        raise ConfigError(f"run {run_id!r} is not in the lake {q.lake.url}")
    return rows[0]


def headline_rows(q: LakeQueries, run_id: str, *, n_boot: int = 1000) -> tuple[list[dict], list[dict]]:
    """(metrics with ok values: n, mean, CI and the other statuses; metrics without any ok value). Of two
    metrics that give the same figure (the registry's same_as), one is shown."""
    ci = {r["metric"]: r for r in q.metric_ci(run_id, "all", n_boot=n_boot)}
    scored, unscored = [], []
    rows = [r for r in q.breakdown([run_id], "all") if r["n_rows"]]
    hidden = repeated({r["metric"] for r in rows if r["n"]})
    for row in registry_order([r for r in rows if r["metric"] not in hidden]):
        interval = ci.get(row["metric"], {})
        merged = {**row, **interval, "mean": _clean(interval.get("mean", row["mean"]))}
        merged.setdefault("ci_low", None)
        merged.setdefault("ci_high", None)
        (scored if row["n"] else unscored).append(merged)
    return scored, unscored


def _chart_groups(headline: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Title -> the run's headline metrics with `ok` values, by family in the registry's order."""
    have = {r["metric"] for r in headline if r["n"]}
    groups: dict[str, list[str]] = {}
    for m in all_metrics(level="case"):
        if m.headline and m.name in have:
            groups.setdefault(CHART_TITLES.get(m.family, m.family), []).append(m.name)
    return groups


def worst_cases(q: LakeQueries, run_id: str, metrics: list[str], n: int) -> dict[str, list[dict[str, Any]]]:
    if n <= 0 or not metrics:
        return {}
    rows = run_query(q.con, "worst_cases", run_id=run_id, metrics=metrics, n=n).to_pylist()
    out: dict[str, list[dict[str, Any]]] = {m: [] for m in metrics}
    for row in rows:
        row["chunks"] = row["chunks"] or []
        out[row["metric"]].append(row)
    return {m: cases for m, cases in out.items() if cases}


def worsened_cases(
    q: LakeQueries, baseline_id: str, run_id: str, metrics: list[str], n: int = WORSENED_N
) -> dict[str, list[dict[str, Any]]]:
    """Metric -> the cases whose value moved its bad way the most since the baseline, in the order of `metrics`."""
    if n <= 0 or not metrics:
        return {}
    rows = run_query(q.con, "worsened_cases", run_a=baseline_id, run_b=run_id, metrics=metrics, n=n).to_pylist()
    out: dict[str, list[dict[str, Any]]] = {m: [] for m in metrics}
    for row in rows:
        out[row["metric"]].append(row)
    return {m: cases for m, cases in out.items() if cases}


def comparison(q: LakeQueries, baseline_id: str, run_id: str, *, fdr: float | None = DEFAULT_FDR) -> Comparison:
    """The run against its baseline: verdicts FDR-controlled at `fdr` across every metric × slice test
    (None: each slice's own interval), with the uncorrected flags kept beside them. Of two metrics that
    give the same figure (same_as), one is shown; the counts of tests are those made."""
    rows = registry_order(q.compare(baseline_id, run_id, fdr=fdr))
    hidden = repeated({r["metric"] for r in rows})
    shown = [r for r in rows if r["metric"] not in hidden]
    overall = [r for r in shown if r["dimension"] == "all"]
    flagged = [r for r in shown if r["dimension"] != "all" and (r["regression"] or r["improvement"])]
    flagged.sort(key=lambda r: (not r["regression"], -abs(r["diff"] or 0.0)))
    versions = q.index_versions([baseline_id, run_id])
    changed = versions.get(baseline_id) != versions.get(run_id) and any(versions.values())
    n_regressed = sum(1 for r in flagged if r["regression"])
    n_raw = sum(1 for r in rows if r["dimension"] != "all" and (r["regression_raw"] or r["improvement_raw"]))
    return Comparison(
        run_info(q, baseline_id),
        overall,
        flagged[:MAX_FLAGGED],
        len(flagged),
        n_regressed,
        changed,
        fdr=fdr,
        n_tests=sum(1 for r in rows if r["tested"]),
        n_raw=n_raw,
        summary=verdict_summary(rows, fdr),
    )


def gather(
    q: LakeQueries,
    run_id: str,
    against: str | None = None,
    *,
    worst: int = 10,
    n_boot: int = 1000,
    fdr: float | None = DEFAULT_FDR,
) -> ReportData:
    """Everything the report shows about `run_id` (and, with `against`, its comparison with that baseline)."""
    if worst < 0:
        raise ConfigError(f"--worst must be 0 or more, got {worst}")
    if against == run_id:
        raise ConfigError(f"--against names the report's own run {run_id}; give another run (e.g. latest~1)")
    info = run_info(q, run_id)
    headline, unscored = headline_rows(q, run_id, n_boot=n_boot)
    groups = _chart_groups(headline)
    charted = {m for metrics in groups.values() for m in metrics}
    slices = {}
    for by in BREAKDOWN_DIMENSIONS:
        slices[by] = [r for r in q.metric_ci(run_id, by, n_boot=n_boot) if r["metric"] in charted]
    have = {r["metric"] for r in headline}
    worst_metrics = [m.name for m in all_metrics(level="case") if m.worst_cases and m.name in have]
    data = ReportData(
        run=info,
        headline=headline,
        unscored=unscored,
        slices=slices,
        chart_groups=groups,
        figures=q.figures([run_id]),
        coverage=q.coverage(run_id),
        worst=worst_cases(q, run_id, worst_metrics[:MAX_WORST_METRICS], worst),
        worst_n=worst,
    )
    no_judge = sum(
        r["n_skipped"] for r in unscored + headline if r["family"] == "judge" and r["main_reason"] == "no_judge"
    )
    if no_judge:
        data.notes.append(NO_JUDGE_NOTE.format(n=no_judge))
    budget = sum(r["n_skipped"] for r in unscored + headline if r["main_reason"] == "budget")
    if budget:
        data.notes.append(f"{budget} judge metric value(s) were skipped: the judge budget ran out.")
    if against is not None:
        data.comparison = comparison(q, against, run_id, fdr=fdr)
        _add_baseline(q, data, data.comparison, n_boot)
        if data.comparison.index_changed:
            data.notes.append(
                f"the index changed between the runs (index_version "
                f"{data.comparison.baseline['index_version'] or '–'} → {info['index_version'] or '–'})"
            )
        if data.comparison.baseline["dataset_hash"] != info["dataset_hash"]:
            data.notes.append("the runs used different golden sets: only the cases they share are compared")
    # the model behind a judge name changed since the baseline (or the previous run of the same target), or
    # within this run
    baseline = against or q.previous_run(run_id)
    drift = judge_drift(q.con, [baseline, run_id] if baseline else [run_id])
    data.notes += [drift_note(r) for r in drift if r["run_after"] == run_id]
    rows = run_query(q.con, "metaeval", metaeval_id="").to_pylist()
    data.metaeval = [r for r in rows if r["split"] != "dev" and not r["repeats"]]  # a repeat: sql/metaeval.sql
    return data


def _add_baseline(q: LakeQueries, data: ReportData, cmp: Comparison, n_boot: int) -> None:
    """The baseline's side of the report: its slices beside the candidate's in the breakdown charts, and
    the cases that got worse: of every metric that regressed overall, then of the headline metrics (up to
    MAX_WORST_METRICS in all, never fewer than the regressed ones)."""
    baseline_id = cmp.baseline["run_id"]
    charted = {m for metrics in data.chart_groups.values() for m in metrics}
    for by in BREAKDOWN_DIMENSIONS:
        data.baseline_slices[by] = [r for r in q.metric_ci(baseline_id, by, n_boot=n_boot) if r["metric"] in charted]
    regressed = [r["metric"] for r in cmp.overall if r["regression"]]  # registry order
    have = {r["metric"] for r in data.headline}
    headline = [m.name for m in all_metrics(level="case") if m.headline and m.name in have and m.name not in regressed]
    chosen = regressed + headline[: max(0, MAX_WORST_METRICS - len(regressed))]
    data.worsened = worsened_cases(q, baseline_id, data.run["run_id"], chosen)
