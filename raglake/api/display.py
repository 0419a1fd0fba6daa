"""How the Python API's results look in a notebook (IPython's `_repr_html_`): a Result as its headline metrics
with their 95% intervals, a comparison as its verdict above its rows, the lake as its newest runs. Compact
HTML, every value escaped; the objects stay what they are (a comparison is still a DataFrame)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import pandas as pd

from raglake.analysis import LakeQueries, verdict_headline
from raglake.metrics.registry import repeated
from raglake.report.format import number

STYLE = "border-collapse:collapse;font-size:.85em"
CELL = "padding:.15em .6em;border-bottom:1px solid #ddd;text-align:{}"


def _cell(value: Any, align: str = "right", tag: str = "td") -> str:
    text = number(value) if not isinstance(value, str) else value
    return f'<{tag} style="{CELL.format(align)}">{html.escape(text)}</{tag}>'


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], left: int = 1) -> str:
    head = "".join(_cell(h, "left" if i < left else "right", "th") for i, h in enumerate(header))
    body = "".join(
        "<tr>" + "".join(_cell(v, "left" if i < left else "right") for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return f'<table style="{STYLE}"><tr>{head}</tr>{body}</table>'


def _interval(low: Any, high: Any) -> str:
    missing = (low is None or pd.isna(low)) and (high is None or pd.isna(high))
    return "–" if missing else f"[{number(low)}, {number(high)}]"


def result_html(run_id: str, target: str, lake: str, summary: pd.DataFrame) -> str:
    """A run's headline metrics: n, mean and the 95% CI (raglake.api.result.Result.summary), and what was not scored."""
    where = f"{html.escape(target)} · <code>{html.escape(lake)}</code>"
    title = f"<p><strong>run {html.escape(run_id)}</strong> · {where}</p>"
    if summary.empty:
        return title + "<p><em>no metric has a value in this run</em></p>"
    rows = [
        (
            r["metric"],
            r["n"],
            r["mean"],
            _interval(r.get("ci_low"), r.get("ci_high")),
            int(sum(r.get(k) or 0 for k in ("n_undefined", "n_skipped", "n_failed"))),
        )
        for r in summary.to_dict("records")
    ]
    return title + _table(["metric", "n", "mean", "95% CI", "not scored"], rows)


def lake_html(lake: str, runs: pd.DataFrame, shown: int = 10) -> str:
    """The lake's newest runs."""
    title = f"<p><strong>raglake lake</strong> <code>{html.escape(lake)}</code>: {len(runs)} run(s)</p>"
    if runs.empty:
        return title
    rows = [
        (r["run_id"], str(r["started_at"])[:16], r["target_name"], r["dataset_name"], r["n_cases"])
        for r in runs.head(shown).to_dict("records")
    ]
    more = f"<p><em>the {shown} newest shown</em></p>" if len(runs) > shown else ""
    return title + _table(["run", "started", "target", "golden set", "cases"], rows, left=4) + more


def comparison_verdict(q: LakeQueries, run_a: str, run_b: str, rows: list[dict[str, Any]]) -> str:
    """The verdict line of `raglake compare` (raglake.analysis.verdict_headline over every row, a metric that
    repeats another's figure left out): its runs by id when they share a target, else by target."""
    name_a, name_b = q.target_name(run_a), q.target_name(run_b)
    a, b = (run_a, run_b) if name_a == name_b else (name_a, name_b)
    hidden = repeated({r["metric"] for r in rows})
    return verdict_headline([r for r in rows if r["metric"] not in hidden], f"B = {b} against A = {a}")


class ComparisonFrame(pd.DataFrame):
    """The rows of a comparison (a DataFrame like any other), shown in a notebook under its verdict. A frame
    derived from it (filtered, indexed, …) is a plain DataFrame: the verdict is of these rows only."""

    _metadata = ["verdict"]

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @classmethod
    def of(cls, frame: pd.DataFrame, verdict: str) -> ComparisonFrame:
        out = cls(frame)
        out.verdict = verdict
        return out

    def _repr_html_(self) -> str | None:
        verdict = f"<p><strong>{html.escape(getattr(self, 'verdict', '') or '')}</strong></p>"
        return verdict + (pd.DataFrame(self)._repr_html_() or "")
