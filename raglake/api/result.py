"""What `raglake.evaluate(...)` returns: one landed run, read back from its lake as DataFrames."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from raglake.api.display import result_html
from raglake.api.lake import LakeFrames, frame, metric_order
from raglake.errors import ConfigError
from raglake.lake.store import Lake
from raglake.metrics.registry import repeated

# what summary() shows of a metric by default (all=True: every column of sql/breakdown.sql)
SUMMARY_COLUMNS = ("family", "n", "mean", "ci_low", "ci_high", "n_undefined", "n_skipped", "n_failed", "main_reason")


@dataclass(frozen=True)
class Result:
    """A run in a lake: `run_id`, and its summary, scores and comparisons as DataFrames."""

    run_id: str
    lake: str

    @classmethod
    def of(cls, run: str = "latest", lake: str | Path | None = None) -> Result:
        """A run already in a lake (an id, a prefix, `latest` or `latest~N`)."""
        frames = LakeFrames(lake)
        return cls(frames.run_id(run), frames.lake)

    def __repr__(self) -> str:
        return f"Result(run_id={self.run_id!r}, lake={self.lake!r})"

    def _repr_html_(self) -> str:
        """In a notebook: the run's headline metrics, n, mean and 95% CI (raglake.api.display)."""
        return result_html(self.run_id, self.target, self.lake, self.summary())

    @property
    def frames(self) -> LakeFrames:
        return LakeFrames(self.lake)

    @property
    def target(self) -> str:
        return self.frames.queries().target_name(self.run_id)

    def summary(self, by: str = "all", *, ci: bool = True, all: bool = False) -> pd.DataFrame:  # noqa: A002
        """The case-level metrics with values in the run (by slice; default over all cases), metric first:
        n (cases scored `ok`), mean, the bootstrap 95% CI (`ci=True`) and how many cases were undefined /
        skipped / failed, mostly why. A mean is over `ok` values only: an undefined case is never a 0. A
        metric that gives the same figure as another one the run has (the registry's `same_as`) is left
        out. `all=True`: every metric scored, with or without values, with every column."""
        q = self.frames.queries()
        rows = [r for r in q.breakdown([self.run_id], by) if r["n_rows"]]
        if not all:
            hidden = repeated({r["metric"] for r in rows})
            rows = [r for r in rows if r["n"] and r["metric"] not in hidden]
        order = {m: i for i, m in enumerate(metric_order([r["metric"] for r in rows]))}
        out = frame(sorted(rows, key=lambda r: (r["slice"], order[r["metric"]])))
        if ci and not out.empty:
            intervals = frame(q.metric_ci(self.run_id, by))
            if not intervals.empty:
                out = out.merge(intervals[["metric", "slice", "ci_low", "ci_high"]], on=["metric", "slice"], how="left")
        if out.empty:
            return out
        lead = ["metric", *(["slice"] if by != "all" else [])]
        rest = [c for c in out.columns if c not in lead]
        if not all:
            rest = [c for c in SUMMARY_COLUMNS if c in rest]
        else:  # the CI beside the mean
            rest = [c for c in rest if c not in ("ci_low", "ci_high")]
            at = rest.index("mean") + 1
            rest[at:at] = [c for c in ("ci_low", "ci_high") if c in out.columns]
        return out[lead + rest]

    def to_pandas(self, *, wide: bool = False) -> pd.DataFrame:
        """The run's scores: one row per case × metric (value, status, reason, metric_version, with the
        case's question, answer and slices), or with `wide=True` one row per case and a column per
        metric (NaN where the metric has no `ok` value for the case)."""
        return self.frames.scores(self.run_id, wide=wide)

    def figures(self) -> pd.DataFrame:
        """The run-level figures: failure rates, latency percentiles per stage, coverage, judge cost, …"""
        return self.frames.figures(self.run_id)

    def compare(
        self, baseline: Result | str, by: str = "all", *, changes: bool = False, full: bool = False, **options: Any
    ) -> pd.DataFrame:
        """This run (B) against `baseline` (A: a Result in the same lake, or a run id there), paired by
        case: mean_a, mean_b, diff = B − A with its 95% CI, q, the verdict and, for "no clear change",
        why, per metric and slice (`by`: a dimension or "any"; `full=True`: every column; `options`: see
        LakeFrames.compare)."""
        if isinstance(baseline, Result):
            if Lake(baseline.lake).url != Lake(self.lake).url:
                raise ConfigError(
                    f"run {baseline.run_id} lies in another lake ({baseline.lake}); evaluate both with the same "
                    f"lake= to compare them"
                )
            baseline = baseline.run_id
        return self.frames.compare(baseline, self.run_id, by, changes=changes, full=full, **options)
