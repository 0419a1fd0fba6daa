"""`raglake.open_lake(path)`: the lake's questions (runs, breakdowns, comparisons, trends, SQL) as pandas
DataFrames. Each call opens a fresh read-only connection, so runs landed since are seen."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from raglake.analysis import COMPARE_DIMENSIONS, LakeQueries, check_dimension, latest_per_target, missing_lake
from raglake.api.display import ComparisonFrame, comparison_verdict, lake_html
from raglake.lake.query import run_query, run_sql
from raglake.lake.store import Lake
from raglake.metrics.registry import all_metrics, repeated
from raglake.pipeline.lakes import open_lake as open_queries
from raglake.report.format import slice_label

# the columns of sql/case_scores.sql that describe a score, not its case: the wide view keeps the others
SCORE_COLUMNS = (
    "run_id",
    "metric",
    "family",
    "higher_is_better",
    "value",
    "status",
    "reason",
    "metric_version",
    "label_source",
    "embedder",
    "judge_model",
)


# what compare() shows of a row by default, between metric and slice, and q, verdict and why (full=True: every
# column of sql/compare_runs.sql)
COMPARE_COLUMNS = ("n_pairs", "mean_a", "mean_b", "diff", "ci_low", "ci_high")


def frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(list(rows)) if rows else pd.DataFrame()


def metric_order(names: Sequence[str]) -> list[str]:
    """The names in the registry's order (those it no longer holds last, by name)."""
    order = {m.name: i for i, m in enumerate(all_metrics())}
    return sorted(dict.fromkeys(names), key=lambda n: (order.get(n, len(order)), n))


def wide_view(long: pd.DataFrame) -> pd.DataFrame:
    """One row per case: the case's columns, then one column per metric holding its `ok` value (NaN
    where the metric is undefined, skipped or failed for the case; the long view says why)."""
    case_columns = [c for c in long.columns if c not in SCORE_COLUMNS]  # case_id first
    if long.empty:
        return pd.DataFrame(columns=case_columns)
    cases = long.drop_duplicates("case_id")[case_columns].set_index("case_id")
    ok = long.assign(value=long["value"].where(long["status"] == "ok"))
    values = ok.pivot(index="case_id", columns="metric", values="value")
    values = values[metric_order(values.columns)]
    values.columns.name = None
    return cases.join(values).reset_index()


def _or_missing(q: LakeQueries, rows: list[Any]) -> list[Any]:
    """The rows, unless there are none because there is no lake at all (then its LakeError)."""
    if not rows and (missing := missing_lake(q.lake)):
        raise missing
    return rows


class LakeFrames:
    """One lake's questions, answered as DataFrames. Runs are named as in the CLI: a run id, an
    unambiguous prefix, `latest` or `latest~N`."""

    def __init__(self, lake: str | Path | None = None):
        self.lake = Lake(lake).url

    def __repr__(self) -> str:
        return f"LakeFrames({self.lake!r})"

    def _repr_html_(self) -> str:
        """In a notebook: the lake's newest runs (raglake.api.display)."""
        q = self.queries()
        return lake_html(self.lake, frame(q.runs(50)))

    def queries(self) -> LakeQueries:
        """raglake's query object over the lake (a fresh connection: it sees every committed run)."""
        return open_queries(self.lake)

    def run_id(self, run: str = "latest") -> str:
        return self.queries().run_ids([run])[0]

    def runs(self, limit: int = 50) -> pd.DataFrame:
        """The committed runs, newest first (a LakeError when there is no lake at the path)."""
        q = self.queries()
        return frame(_or_missing(q, q.runs(limit)))

    def breakdown(self, run: str | Sequence[str] | None = None, by: str = "category") -> pd.DataFrame:
        """Every case-level metric by slice: n, mean and the not-scored counts. `run`: one or several
        runs (default the latest; with by="target" the latest run of every target)."""
        q = self.queries()
        check_dimension(by)
        if run is None:
            run_ids = _or_missing(q, latest_per_target(q.con)) if by == "target" else q.run_ids(["latest"])
        else:
            run_ids = q.run_ids([run] if isinstance(run, str) else list(run))
        return frame(q.breakdown(run_ids, by))

    def compare(
        self, run_a: str, run_b: str, by: str = "all", *, changes: bool = False, full: bool = False, **options: Any
    ) -> pd.DataFrame:
        """Run B against run A (the baseline) per metric and slice, paired by case, as `raglake compare`
        prints it: n_pairs, both means, the difference B − A with its per-slice 95% CI (ci_low, ci_high),
        q (Benjamini-Hochberg), the verdict (worse / better / no clear change) and, for no clear change,
        why. A metric that repeats another one's figure (the registry's `same_as`) is left out. `by`: a
        dimension or "any"; `changes`: only rows where the difference is real; `full=True`: every metric
        and every column of sql/compare_runs.sql (p_value, tested, the FDR-adjusted fdr_low / fdr_high,
        …); `options`: those of raglake.analysis.LakeQueries.compare (e.g. `alpha`, `min_pairs`)."""
        if by != "any":
            check_dimension(by, COMPARE_DIMENSIONS)
        q = self.queries()
        a, b = q.run_ids([run_a])[0], q.run_ids([run_b])[0]
        every = q.compare(a, b, **options)
        verdict = comparison_verdict(q, a, b, every)  # shown above the rows in a notebook
        rows = [
            r
            for r in every
            if (by == "any" or r["dimension"] == by) and (not changes or r["regression"] or r["improvement"])
        ]
        if full:
            return ComparisonFrame.of(frame(rows), verdict)
        hidden = repeated({r["metric"] for r in rows})
        compact = [
            {
                "metric": r["metric"],
                "slice": slice_label(r["dimension"], r["slice"]),
                **{key: r[key] for key in COMPARE_COLUMNS},
                "q": r["q_value"],
                "verdict": r["verdict"],
                "why": r["why"],
            }
            for r in rows
            if r["metric"] not in hidden
        ]
        columns = ["metric", "slice", *COMPARE_COLUMNS, "q", "verdict", "why"]
        return ComparisonFrame.of(pd.DataFrame.from_records(compact, columns=columns), verdict)

    def trend(self, metric: str | None = None, target: str | None = None, by: str = "all") -> pd.DataFrame:
        """Metrics over runs, oldest first."""
        q = self.queries()
        return frame(_or_missing(q, q.trend(metric, target, None, by)))

    def sql(self, query: str) -> pd.DataFrame:
        """A read-only query over the lake's views (runs, cases, chunks, scores, scores_latest, labels,
        coverage, run_metrics, case_slices, metrics, …)."""
        return run_sql(self.queries().con, query).to_pandas()

    def figures(self, run: str = "latest") -> pd.DataFrame:
        """A run's run-level figures: rates, latency percentiles per stage, coverage, judge cost, …"""
        q = self.queries()
        return frame(q.figures(q.run_ids([run])))

    def coverage(self, run: str = "latest") -> pd.DataFrame:
        """A run's index manifest (empty when its target exposes none)."""
        q = self.queries()
        return frame(q.coverage(q.run_ids([run])[0]))

    def health(self, run: str = "latest", by: str = "all") -> pd.DataFrame:
        """Capture failures by slice: error, timeout and empty-answer rates, abstentions."""
        q = self.queries()
        return frame(q.capture_health(q.run_ids([run]), by))

    def scores(self, run: str = "latest", *, wide: bool = False) -> pd.DataFrame:
        """A run's scores: one row per case × metric with status and reason (long), or one row per case
        with a column per metric (`wide=True`)."""
        q = self.queries()
        long = run_query(q.con, "case_scores", run_id=q.run_ids([run])[0]).to_pandas()
        return wide_view(long) if wide else long


def open_lake(path: str | Path | None = None) -> LakeFrames:
    """The lake at `path` (a folder or an fsspec URL; default $RAGLAKE_LAKE, else data/lake)."""
    return LakeFrames(path)
