"""How raglake shows numbers and the metrics that have no value, in one place: the CLI's tables, the HTML
report and the Prefect artifacts all format through `number` (one rounding path: a mean never shows as
0.669 in one place and 0.670 in another) and fold unscored metrics with `fold_unscored`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

DIGITS = 3
# beside a run's latency figures that an earlier run measured (sql/run_figures.sql's `reused`): CLI and report
REUSED_NOTE = (
    "(reused): the target's latency as measured by the earlier run whose captures this run reused; "
    "this run did not call the target for those cases"
)

# why a metric has no value, in words (the score rows' reason codes); other codes are shown as they are
REASONS = {
    "no_judge": "no judge configured",
    "budget": "the judge budget ran out",
    "no_labels": "no labels in the golden set",
    "no_label": "no labels in the golden set",
    "folder_mode_off": "the target does not select folders",
    "capture_failed": "the captures failed",
    "not_answerable": "no answerable case",
    "answerable": "no unanswerable case",
    "no_recency_rule": "no case has a recency rule",
    "no_required_groups": "no case has required support groups",
}
STATUSES = (("n_failed", "failed"), ("n_skipped", "skipped"), ("n_undefined", "undefined"))


def number(value: Any, digits: int = DIGITS, *, thousands: bool = False) -> str:
    """A value for display: floats to `digits` decimals (the one rounding raglake shows), None and NaN as
    '–', booleans as yes/no, ints as they are (with `thousands`, grouped: 1,234)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}" if thousands else str(value)
    if isinstance(value, float):
        text = f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.,") else text  # never "-0.000"
    return str(value)


def rounded(value: float | None, digits: int = DIGITS) -> float | None:
    """The number as displayed, as a float (for tables of plain values, such as a Prefect table artifact)."""
    if value is None or math.isnan(value):
        return None
    return float(f"{value:.{digits}f}") + 0.0  # + 0.0: -0.0 becomes 0.0


def pvalue(value: float | None) -> str:
    """A p- or q-value: 3 decimals, small ones in scientific notation."""
    if value is None or math.isnan(value):
        return "–"
    return f"{value:.1e}" if value < 0.001 else f"{value:.3f}"


def interval(low: float | None, high: float | None, digits: int = DIGITS) -> str:
    return "–" if low is None and high is None else f"[{number(low, digits)}, {number(high, digits)}]"


def reason_text(reason: str | None) -> str:
    return REASONS.get(reason or "", (reason or "no reason recorded").replace("_", " "))


def main_status(row: dict[str, Any]) -> str:
    """failed, skipped or undefined: the status most of a metric's rows without a value have (failed first on a tie)."""
    return max(STATUSES, key=lambda s: row.get(s[0]) or 0)[1]


def fold_unscored(rows: Sequence[dict[str, Any]], name_limit: int = 3) -> list[dict[str, Any]]:
    """Metrics with no `ok` value (breakdown rows of slice `all`, n = 0) folded into one entry per family,
    status and reason, in the order of `rows`: {family, status, reason, metrics, text}, the text as in
    "18 judge metrics with no value: skipped on every case (no judge configured)" (with the names when
    there are `name_limit` or fewer). A metric with a value is never counted, whatever its status counts."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["n"]:
            continue
        key = (r.get("family") or "other", main_status(r), r.get("main_reason") or "")
        groups.setdefault(key, []).append(r)
    out = []
    for (family, status, reason), members in groups.items():
        metrics = [r["metric"] for r in members]
        n = len(metrics)
        names = f" ({', '.join(metrics)})" if n <= name_limit else ""
        column = dict((label, key) for key, label in STATUSES)[status]
        every = all((r.get(column) or 0) == sum(r.get(k) or 0 for k, _ in STATUSES) for r in members)
        text = (
            f"{n} {family} metric{'s' if n != 1 else ''} with no value{names}: {status} on "
            f"{'every case' if every else 'most cases'} ({reason_text(reason)})"
        )
        out.append({"family": family, "status": status, "reason": reason, "metrics": metrics, "text": text})
    return out


def slice_label(dimension: str, slice_: str) -> str:
    """A slice as the CLI, the report and the API name it: `all`; `answerable` / `unanswerable` (never
    answerable=answerable); `untagged`; otherwise dimension=slice (category=factual, tag=atlas)."""
    if dimension in ("all", "answerable"):
        return slice_
    if dimension == "tag" and slice_ == "(untagged)":
        return "untagged"
    return f"{dimension}={slice_}"
