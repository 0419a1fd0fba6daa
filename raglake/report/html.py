"""The report as one self-contained HTML file: jinja2 (autoescaped) over the package's template, the
charts inline as SVG, the CSS inline; no script and no reference to anything outside the file."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

import raglake
from raglake import outputs
from raglake.report import charts
from raglake.report.data import BREAKDOWN_DIMENSIONS, ReportData
from raglake.report.format import REUSED_NOTE, fold_unscored, number, pvalue, slice_label

TEMPLATE = "template.html.j2"
SNIPPET_CHARS = 600
ANSWER_CHARS = 400  # an answer in the side-by-side table of cases that got worse
MAX_SLICE_ROWS = 20  # slices with a real difference shown open; the rest behind a <details>


def num(value: Any, digits: int = 3) -> str:
    """A cell of the report: raglake.report.format.number with thousands grouped."""
    return number(value, digits, thousands=True)


def figure_value(row: dict[str, Any]) -> str:
    """A run-level figure with its unit: 931 ms, 1.5%, $0.0123, 12 calls; a cost some call had no price
    for says so (sql/run_figures.sql's price_known)."""
    value, unit = row["value"], row.get("unit") or ""
    unpriced = " (price unknown)" if row.get("price_known") is False else ""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–" + unpriced
    if unit == "share":
        return f"{100 * value:.1f}%"
    if unit == "usd":
        return f"${value:,.4f}{unpriced}"
    if unit in ("ms", "seconds", "s"):
        return f"{value:,.1f} {unit}"
    shown = f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"
    return f"{shown} {unit}".strip()


def coverage_value(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"


def pretty_json(text: str | None) -> str:
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        num=num, pvalue=pvalue, figure_value=figure_value, coverage_value=coverage_value, pretty_json=pretty_json
    )
    env.globals.update(arrow=charts.arrow, reused_note=REUSED_NOTE, slice_label=slice_label)
    return env


def _template() -> jinja2.Template:
    text = resources.files("raglake.report").joinpath(TEMPLATE).read_text(encoding="utf-8")
    return _environment().from_string(text)


def _charts(data: ReportData) -> dict[str, Any]:
    """SVG markup (trusted: made here, with every label escaped by matplotlib's SVG writer)."""
    info = data.metric_info
    breakdown: dict[str, list[tuple[str, Markup]]] = {}
    for dimension in BREAKDOWN_DIMENSIONS:
        for title, metrics in data.chart_groups.items():
            svg = charts.breakdown_chart(
                dimension,
                data.slices.get(dimension, []),
                metrics,
                info,
                salt=f"{dimension}-{title}",
                baseline=data.baseline_slices.get(dimension) if data.comparison else None,
            )
            if svg:
                breakdown.setdefault(dimension, []).append((title, Markup(svg)))
    overall = charts.overall_chart(data.headline, salt="overall")
    diff = charts.diff_chart(data.comparison.overall, salt="diff") if data.comparison else None
    return {
        "breakdown": breakdown,
        "overall": Markup(overall) if overall else None,
        "diff": Markup(diff) if diff else None,
    }


def render(data: ReportData) -> str:
    n_tags = len({r["slice"] for r in data.slices.get("tag", [])})
    return _template().render(
        d=data,
        charts=_charts(data),
        dimensions=BREAKDOWN_DIMENSIONS,
        max_slices=charts.MAX_SLICES,
        n_tags=n_tags,
        snippet_chars=SNIPPET_CHARS,
        answer_chars=ANSWER_CHARS,
        max_slice_rows=MAX_SLICE_ROWS,
        folded=fold_unscored(data.unscored),
        version=getattr(raglake, "__version__", ""),
        generated=data.generated_at.strftime("%Y-%m-%d %H:%M UTC"),
    )


def check_output(path: str | Path) -> Path:
    """The report's path, checked before any work (raglake.outputs.check_target): its folder exists, and it
    is absent or a regular file, not a link, a folder or a device; `-` is standard output."""
    return outputs.check_target(path, "the report")


def write(data: ReportData, path: str | Path) -> Path:
    """Render the report and write it (UTF-8) to `path`, or `-` (standard output), through
    raglake.outputs: a private temporary file, then a rename; never through a link, never a partial file."""
    return outputs.write_text(check_output(path), render(data), "the report")
