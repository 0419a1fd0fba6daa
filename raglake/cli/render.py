"""Rich tables for the CLI: run summaries, breakdowns, comparisons and plain query results."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from rich.console import Console
from rich.table import Table

# wide enough for breakdown tables when the output is a pipe or a CI log
console = Console() if sys.stdout.isatty() else Console(width=160)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    return str(value)


def arrow_table(table: pa.Table, title: str | None = None, max_rows: int = 200) -> Table:
    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold")
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*(fmt(v) for v in row.values()))
    if table.num_rows > max_rows:
        out.caption = f"{table.num_rows - max_rows} more rows not shown"
    return out


def rows_table(rows: Sequence[dict[str, Any]], title: str | None = None, max_rows: int = 200) -> Table:
    return arrow_table(
        pa.Table.from_pylist(list(rows)) if rows else pa.table({"(no rows)": pa.array([], pa.string())}),
        title,
        max_rows,
    )


def _status_note(row: dict[str, Any]) -> str:
    parts = []
    for key, label in (("n_undefined", "undefined"), ("n_skipped", "skipped"), ("n_failed", "failed")):
        if row.get(key):
            parts.append(f"{row[key]} {label}")
    note = ", ".join(parts)
    return f"{note} (mostly {row['main_reason']})" if note and row.get("main_reason") else note


def summary_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """One run, slice `all`: metric | family | n | mean | other statuses."""
    out = Table(title=title)
    for col, justify in (
        ("metric", "left"),
        ("family", "left"),
        ("n", "right"),
        ("mean", "right"),
        ("not scored", "left"),
    ):
        out.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in rows:
        out.add_row(r["metric"], r["family"] or "", str(r["n"]), fmt(r["mean"]), _status_note(r))
    return out


def pivot_table(rows: Sequence[dict[str, Any]], metrics: Sequence[str], title: str) -> Table:
    """Breakdown: one line per (target, slice), one column per metric, cells 'mean (n)'."""
    out = Table(title=title)
    several_targets = len({r["target"] for r in rows}) > 1
    if several_targets:
        out.add_column("target", no_wrap=True)
    out.add_column("slice", no_wrap=True)
    for m in metrics:  # spaces let long metric names wrap inside narrow columns
        out.add_column(m.replace("_", " "), justify="right", overflow="fold")
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        key = (r["target"], r["slice"])
        cells.setdefault(key, {})[r["metric"]] = f"{fmt(r['mean'])} ({r['n']})" if r["n"] else "–"
    for (target, slice_), values in cells.items():
        out.add_row(*([target] if several_targets else []), slice_, *(values.get(m, "–") for m in metrics))
    return out


def slice_label(dimension: str, slice_: str) -> str:
    return slice_ if dimension in ("all", "answerable") else f"{dimension}={slice_}"


def verdict(row: dict[str, Any]) -> str:
    if row["regression"]:
        return "[bold red]worse[/]"
    if row["improvement"]:
        return "[bold green]better[/]"
    return "[dim]no clear change[/]"


def comparison_table(rows: Sequence[dict[str, Any]], name_a: str, name_b: str, title: str) -> Table:
    out = Table(title=title)
    out.add_column("metric")
    out.add_column("slice")
    out.add_column("n", justify="right")
    out.add_column(name_a, justify="right")
    out.add_column(name_b, justify="right")
    out.add_column("Δ (B−A)", justify="right")
    out.add_column("95% CI", justify="right")
    out.add_column("verdict")
    for r in rows:
        arrow = "" if r["higher_is_better"] is None else ("↑" if r["higher_is_better"] else "↓")
        ci = f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]" if r["ci_low"] is not None else "–"
        out.add_row(
            f"{r['metric']} {arrow}",
            slice_label(r["dimension"], r["slice"]),
            str(r["n_pairs"]),
            fmt(r["mean_a"]),
            fmt(r["mean_b"]),
            fmt(r["diff"]),
            ci,
            verdict(r),
        )
    return out


def figures_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    out = Table(title=title)
    for col in ("figure", "stage", "value", "n"):
        out.add_column(col, justify="right" if col in ("value", "n") else "left")
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] and r["unit"] not in ("share",) else ""
        digits = 4 if r["unit"] == "usd" else (1 if unit else 3)
        out.add_row(r["metric"], r["stage"] or "", fmt(r["value"], digits) + unit, str(r["n"]))
    return out


def coverage_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    out = Table(title=title)
    for col in ("stat", "doc type", "reason", "value"):
        out.add_column(col, justify="right" if col == "value" else "left")
    for r in rows:
        value = r["value"]
        shown = str(int(value)) if float(value).is_integer() else fmt(value, 1)
        out.add_row(r["stat"], r["doc_type"] or "all", r["reason"] or "", shown)
    return out
