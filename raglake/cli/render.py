"""Rich tables for the CLI: run summaries, breakdowns, comparisons and plain query results."""

from __future__ import annotations

import datetime as dt
import os
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from raglake.report.format import REUSED_NOTE, fold_unscored, number, pvalue, slice_label

PIPE_WIDTH = 120  # a pipe or a CI log without $COLUMNS: wide enough for every --help option name


def output_width() -> int | None:
    """The width the CLI writes at: the terminal's; when stdout is not a terminal, $COLUMNS if set, else
    PIPE_WIDTH (rich alone would fall back to 80 and truncate --help's option names)."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


console = Console(width=output_width())


def write_held(text: str) -> None:
    """What a `console.capture()` held, written as it was rendered and flushed; a reader that went away (`| head`)
    ends the command as rich's own printing does (Console.on_broken_pipe)."""
    try:
        console.file.write(text)
        console.file.flush()
    except BrokenPipeError:
        console.on_broken_pipe()
MIN_COLUMN = 6  # a number column never narrower than "0.123"


def fmt(value: Any, digits: int = 3) -> str:
    """A cell: raglake.report.format.number, the rounding the report and the artifacts use too."""
    return number(value, digits)


def _whole(name: str) -> bool:
    """A column whose values are never split across lines or cut: ids and timestamps (the other columns fold)."""
    return name.endswith(("_id", "_at")) or name in ("run", "baseline", "candidate")


def arrow_table(table: pa.Table, title: str | None = None, max_rows: int = 200) -> Table:
    out = Table(title=title, show_lines=False)
    rows = [[fmt(v) for v in row.values()] for row in table.slice(0, max_rows).to_pylist()]
    for i, name in enumerate(table.column_names):
        if _whole(name):
            out.add_column(name, no_wrap=True, min_width=max([len(name), *(len(r[i]) for r in rows)]))
        else:
            out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*row)
    if table.num_rows > max_rows:
        out.caption = f"{table.num_rows - max_rows} more rows not shown"
    return out


# `raglake runs`: the runs file's columns, ids and timestamps never wrapped. Kept while the console is wide
# enough, in this order (the rest are left out, least important first); shown in the file's order.
RUN_PRIORITY = (
    "run_id",
    "started_at",
    "status",
    "target_name",
    "n_cases",
    "dataset_name",
    "finished_at",
    "k",
    "dataset_hash",
    "target_spec",
)
RUN_FOLDED = {"target_name": 16, "dataset_name": 16, "target_spec": 24}  # may fold, at about this width
RUN_NUMBERS = ("n_cases", "k")


def _utc(value: Any) -> str:
    """A timestamp as `2026-01-01 00:03:05` in UTC (19 characters, never split)."""
    if value is None:
        return "–"
    if value.tzinfo is not None:
        value = value.astimezone(dt.timezone.utc)
    return f"{value:%Y-%m-%d %H:%M:%S}"


def runs_table(rows: Sequence[dict[str, Any]], width: int) -> Table:
    """The runs, newest first, at a console `width`: run ids, timestamps, counts and statuses on one line
    each; names fold; the least important columns (target_spec, dataset_hash, k, finished_at, …) are left
    out, in that order, when they would not fit (the caption names them)."""
    cells = [{c: _utc(r[c]) if c.endswith("_at") else fmt(r[c]) for c in RUN_PRIORITY} for r in rows]
    need = {c: max([len(c), *(len(x[c]) for x in cells)]) for c in RUN_PRIORITY}
    if 1 + need["run_id"] + 3 + need["started_at"] + 3 > width:  # not even both side by side: one under the other
        return _narrow_runs(cells)
    shown: list[str] = []
    used = 1  # the left border; each column adds its padding and a border: 3
    for c in RUN_PRIORITY:
        wanted = min(need[c], max(RUN_FOLDED[c], len(c))) if c in RUN_FOLDED else need[c]
        if shown[:2] == ["run_id", "started_at"] and used + wanted + 3 > width:
            continue
        shown.append(c)
        used += wanted + 3
    order = [c for c in rows[0] if c in shown] if rows else list(RUN_PRIORITY)
    out = Table(title="runs (times in UTC)")
    for c in order:
        folds = c in RUN_FOLDED
        out.add_column(
            c,
            justify="right" if c in RUN_NUMBERS else "left",
            no_wrap=not folds,
            overflow="fold" if folds else "ellipsis",
            min_width=None if folds else need[c],
        )
    for x in cells:
        out.add_row(*(x[c] for c in order))
    left_out = [c for c in RUN_PRIORITY if c not in shown]
    if left_out and rows:
        out.caption = f'not shown at this width: {", ".join(left_out)} (raglake sql "SELECT * FROM runs")'
    return out


def _narrow_runs(cells: list[dict[str, str]]) -> Table:
    out = Table(title="runs (times in UTC)")
    out.add_column("run_id\nstarted_at · status", no_wrap=True)
    for x in cells:
        out.add_row(f"{x['run_id']}\n{x['started_at']} · {x['status']}")
    return out


DIRECTIONS = {True: "higher", False: "lower", None: "–"}


def metrics_table(metrics: Sequence[Any]) -> Table:
    """`raglake metrics`: one line per metric (name, family, direction, scale, where it is defined); the
    long form (`--long`) has every column."""
    out = Table(title=f"metrics ({len(metrics)}; --long for descriptions and inputs)", show_lines=False)
    for name in ("metric", "family", "better", "scale", "level", "origin", "same as"):
        out.add_column(name, no_wrap=True, overflow="ellipsis")
    for m in metrics:
        origin = m.origin if m.builtin else f"{m.origin}: {m.source}"
        same = getattr(m, "same_as", None) or ""
        out.add_row(m.name, m.family, DIRECTIONS[m.higher_is_better], m.scale, m.level, origin, same)
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
    # a reason may hold a server's words: escaped, or `[/]` in it breaks the table and `[redacted]` vanishes
    return f"{note} (mostly {escape(row['main_reason'])})" if note and row.get("main_reason") else note


def summary_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """One run, slice `all`, the metrics with values: metric | family | n | mean | other statuses (the
    metrics without any value are folded into lines by `unscored_lines`)."""
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
        if r["n"]:
            out.add_row(r["metric"], r["family"] or "", str(r["n"]), fmt(r["mean"]), _status_note(r))
    return out


def unscored_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per family × status × reason for the metrics without any value ("18 judge metrics
    skipped: no judge configured"); failures in red."""
    style = {"failed": "bold red", "skipped": "dim", "undefined": "dim"}
    return [f"[{style[g['status']]}]{escape(g['text'])}[/]" for g in fold_unscored(rows)]


def _cell(row: dict[str, Any]) -> str:
    return f"{fmt(row['mean'])} ({row['n']})" if row["n"] else "–"


def _column_width(metric: str, cells: Sequence[str]) -> int:
    """A metric column: as wide as its widest cell (numbers never wrap), or its header's longest word."""
    longest_word = max(len(w) for w in metric.split("_"))
    return max(MIN_COLUMN, *(len(c) for c in cells), min(longest_word, 13))


def pivot_table(rows: Sequence[dict[str, Any]], metrics: Sequence[str], title: str) -> Group:
    """Breakdown: one line per (target, slice), one column per metric, cells 'mean (n)'; the metric
    columns split over as many tables as the console's width needs (a number never wraps), or one
    line per slice × metric when not even one metric column fits beside the slice."""
    several_targets = len({r["target_name"] for r in rows}) > 1
    cells: dict[tuple[str, str], dict[str, str]] = {}
    for r in rows:
        cells.setdefault((r["target_name"], r["slice"]), {})[r["metric"]] = _cell(r)
    keys = list(cells)
    widths = {m: _column_width(m, [cells[k].get(m, "–") for k in keys]) for m in metrics}
    lead = [len(k[1]) for k in keys] + [5]
    lead_w = max(lead) + 3 + ((max(len(k[0]) for k in keys) + 3) if several_targets and keys else 0)
    whole = {m: max(widths[m], len(m)) for m in metrics}  # headers on one line when it all fits at once
    if 1 + lead_w + sum(w + 3 for w in whole.values()) <= console.width:
        widths = whole
    chunks: list[list[str]] = [[]]
    for m in metrics:
        used = 1 + lead_w + sum(widths[c] + 3 for c in chunks[-1])
        if chunks[-1] and used + widths[m] + 3 > console.width:
            chunks.append([])
        chunks[-1].append(m)
    if metrics and 1 + lead_w + widths[metrics[0]] + 3 > console.width:
        return Group(_long_pivot(keys, cells, metrics, several_targets, title))
    tables = []
    for i, chunk in enumerate(chunks):
        part = f" ({i + 1}/{len(chunks)})" if len(chunks) > 1 else ""
        out = Table(title=title + part)
        if several_targets:
            out.add_column("target_name", no_wrap=True)
        out.add_column("slice", no_wrap=True)
        for m in chunk:  # spaces let long metric names wrap inside their column
            out.add_column(m.replace("_", " "), justify="right", width=widths[m], overflow="fold")
        for target, slice_ in keys:
            values = cells[(target, slice_)]
            out.add_row(*([target] if several_targets else []), slice_, *(values.get(m, "–") for m in chunk))
        tables.append(out)
    return Group(*tables)


def _long_pivot(keys: list, cells: dict, metrics: Sequence[str], several_targets: bool, title: str) -> Table:
    """The breakdown for a narrow console: one line per (target,) slice × metric."""
    out = Table(title=title)
    if several_targets:
        out.add_column("target_name")
    out.add_column("slice")
    out.add_column("metric", overflow="fold")
    out.add_column("mean (n)", justify="right", no_wrap=True)
    for target, slice_ in keys:
        for m in metrics:
            out.add_row(*([target] if several_targets else []), slice_, m, cells[(target, slice_)].get(m, "–"))
    return out


fmt_p = pvalue


def verdict(row: dict[str, Any]) -> str:
    """The row's verdict (compare_runs: FDR-controlled unless --fdr off), with the uncorrected flag
    beside it when that one differs."""
    if row["regression"]:
        return "[bold red]worse[/]"
    if row["improvement"]:
        return "[bold green]better[/]"
    raw = "worse" if row.get("regression_raw") else "better" if row.get("improvement_raw") else ""
    return f"[dim]no clear change{f' (uncorrected: {raw})' if raw else ''}[/]"


def _comparison_cells(r: dict[str, Any]) -> dict[str, str]:
    arrow = "" if r["higher_is_better"] is None else ("↑" if r["higher_is_better"] else "↓")
    return {
        "metric": f"{r['metric']} {arrow}".strip(),
        "slice": slice_label(r["dimension"], r["slice"]),
        "n": str(r["n_pairs"]),
        "a": fmt(r["mean_a"]),
        "b": fmt(r["mean_b"]),
        "diff": fmt(r["diff"]),
        "ci": f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]" if r["ci_low"] is not None else "–",
        "q": fmt_p(r.get("q_value")),
        "verdict": verdict(r),
    }


WIDE = (("metric", "metric"), ("slice", "slice"), ("n", "n"), ("a", "A"), ("b", "B"), ("diff", "Δ (B−A)"))
WIDE_TAIL = (("ci", "95% CI"), ("q", "q"), ("verdict", "verdict"))


def comparison_table(rows: Sequence[dict[str, Any]], name_a: str, name_b: str, title: str) -> Table:
    """Run B against run A, a row per metric × slice; numbers never wrap: when the columns do not fit
    the console, the narrow layout puts metric and slice in one column and A → B, Δ and its interval
    in two (the title names runs A and B: `name_a`, `name_b`)."""
    cells = [_comparison_cells(r) for r in rows]
    columns = WIDE + WIDE_TAIL
    verdict_w = len("no clear change")
    need = sum(max([len(h), *(len(c[k]) for c in cells)]) + 3 for k, h in columns[:-1]) + verdict_w + 4
    out = Table(title=title)
    if need <= console.width:
        for key, header in columns:
            numeric = key not in ("metric", "slice", "verdict")
            out.add_column(header, justify="right" if numeric else "left", no_wrap=key != "verdict")
        for c in cells:
            out.add_row(*(c[k] for k, _ in columns))
        return out
    out.add_column("metric · slice", overflow="fold")
    out.add_column("A → B (n)", justify="right", no_wrap=True)
    out.add_column("Δ [95% CI] q", justify="right", no_wrap=True)
    out.add_column("verdict")
    for c in cells:
        where = c["metric"] if c["slice"] == "all" else f"{c['metric']} · {c['slice']}"
        out.add_row(where, f"{c['a']} → {c['b']} ({c['n']})", f"{c['diff']} {c['ci']}\nq {c['q']}", c["verdict"])
    return out


def figures_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    out = Table(title=title)
    for col in ("figure", "stage", "value", "n"):
        out.add_column(col, justify="right" if col in ("value", "n") else "left")
    # a run that reused an earlier run's captures did not measure its target's latency (run_figures.sql)
    reused = any(r.get("reused") for r in rows)
    for r in rows:
        unit = f" {r['unit']}" if r["unit"] and r["unit"] not in ("share",) else ""
        digits = 4 if r["unit"] == "usd" else (1 if unit else 3)
        unpriced = " (price unknown)" if r.get("price_known") is False else ""  # sql/run_figures.sql
        cached = " (reused)" if r.get("reused") else ""
        out.add_row(r["metric"], r["stage"] or "", fmt(r["value"], digits) + unit + unpriced + cached, str(r["n"]))
    if reused:
        out.caption = REUSED_NOTE
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


def gate_failing_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """The gate's failing rows: metric, slice, pairs, both means, the drop against its limit, the 95%
    interval and q, one line each (identifiers never fold)."""
    out = Table(title=title)
    out.add_column("metric", no_wrap=True)
    out.add_column("slice", no_wrap=True)
    for header in ("pairs", "A", "B", "drop", "max drop", "95% CI", "q"):
        out.add_column(header, justify="right", no_wrap=True)
    for r in rows:
        out.add_row(
            r["metric"],
            slice_label(r["dimension"], r["slice"]),
            str(r["n_pairs"]),
            fmt(r["mean_a"]),
            fmt(r["mean_b"]),
            fmt(r["drop"]),
            fmt(r["max_drop"]),
            f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]",
            fmt_p(r.get("q_value")),
        )
    return out
