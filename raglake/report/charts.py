"""The report's charts: matplotlib figures rendered as inline SVG markup, with no external reference.

Figures are made with matplotlib's object API (`matplotlib.figure.Figure`), never pyplot, so no GUI
backend is touched and the process's backend stays as it was; rendering goes through the SVG backend.
Text stays text (`svg.fonttype: none`: small, searchable, drawn with the browser's own fonts) and ids
are salted per chart, so several charts inline in one page never share a clip-path or marker id."""

from __future__ import annotations

import functools
import io
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import matplotlib
from matplotlib.figure import Figure

BAR, REGRESSION, IMPROVEMENT, NEUTRAL = "#4c78a8", "#c0392b", "#2e8b57", "#9aa5b1"
BASELINE = "#b9c2cc"  # the baseline's bars, beside the candidate's
SCALE_MAX = {"0-5": 5.0, "1-5": 5.0}
DIFFICULTY_ORDER = {"easy": 0, "medium": 1, "hard": 2}
MAX_SLICES = 20
CHAR_IN = 0.07  # inches per character of an 8 pt label, generous: the browser's own font draws the text
PANEL_COLUMNS = 4
RC = {
    "svg.fonttype": "none",
    "font.size": 8,
    "axes.titlesize": 8.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.image_inline": True,
}

WHISKER = {"elinewidth": 0.8, "capsize": 2, "ecolor": "#333333"}

_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(:\w+)?="[^"]*"')
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_STYLE = re.compile(r"<defs>\s*<style[^>]*>.*?</style>\s*</defs>\s*", re.DOTALL)  # once, in the page's CSS
_GROUP_ID = re.compile(r'\s+id="[A-Za-z][\w.]*_\d+"')  # axes_1, patch_3 …: never referenced, repeated per chart


def _styled(make: Callable[..., str | None]) -> Callable[..., str | None]:
    """Run a chart function under the report's rc settings (fonts are fixed when text is created)."""

    @functools.wraps(make)
    def wrapper(*args: Any, **kwargs: Any) -> str | None:
        with matplotlib.rc_context(RC):
            return make(*args, **kwargs)

    return wrapper


def _grid(
    labels: Sequence[str],
    lines: int,
    cols: int,
    *,
    panel_w: float,
    titled: bool = False,
    xlabel: bool = False,
    row_h: float = 0.22,
) -> tuple[Figure, Any]:
    """A figure of lines × cols panels sharing the y axis (one bar per label), its margins set in
    inches from the labels' length (tight_layout would measure every text: half the drawing time)."""
    left = 0.2 + CHAR_IN * max(len(s) for s in labels)
    panel_h = row_h * len(labels) + 0.12
    top, bottom, right, gap_w, gap_h = (0.3 if titled else 0.12), (0.55 if xlabel else 0.32), 0.15, 0.22, 0.6
    width = left + cols * panel_w + (cols - 1) * gap_w + right
    height = top + lines * panel_h + (lines - 1) * gap_h + bottom
    fig = Figure(figsize=(width, height))
    axes = fig.subplots(
        lines,
        cols,
        sharey=True,
        squeeze=False,
        gridspec_kw={
            "left": left / width,
            "right": 1 - right / width,
            "top": 1 - top / height,
            "bottom": bottom / height,
            "wspace": gap_w / panel_w,
            "hspace": gap_h / panel_h,
        },
    )
    return fig, axes


def _svg(fig: Figure, salt: str) -> str:
    """The figure as an <svg> element for inline HTML: no XML prologue, DOCTYPE, metadata, xmlns or
    unreferenced group ids (the clip-path and marker ids that are referenced carry the chart's salt),
    and no <style> (its one rule, on stroke joins and caps, is in the page's CSS)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = _PROLOGUE.sub("", buf.getvalue())
    for pattern in (_METADATA, _STYLE, _GROUP_ID):
        text = pattern.sub("", text)
    return _XMLNS.sub("", text, count=3).strip()


def _whiskers(rows: Sequence[dict[str, Any]], key: str) -> list[list[float]]:
    """matplotlib's xerr: distances from the bar's end (`key`) down to ci_low and up to ci_high."""
    low = [max(r[key] - r["ci_low"], 0.0) if r.get("ci_low") is not None else 0.0 for r in rows]
    high = [max(r["ci_high"] - r[key], 0.0) if r.get("ci_high") is not None else 0.0 for r in rows]
    return [low, high]


def label(text: str, limit: int = 40) -> str:
    """Text for matplotlib: at most `limit` characters, and a `$` would start mathtext."""
    text = str(text) if len(str(text)) <= limit else str(text)[: limit - 1] + "…"
    return text.replace("$", r"\$")


def arrow(higher_is_better: bool | None) -> str:
    return "" if higher_is_better is None else (" ↑" if higher_is_better else " ↓")


def _ticks(x0: float, scale: str | None) -> list[float]:
    top = SCALE_MAX.get(scale or "", 1.0)
    return [x0 + (top - x0) * i / 4 for i in range(5)] if x0 < 0 else [top * i / 4 for i in range(5)]


def _limits(scale: str | None, rows: Sequence[dict[str, Any]], room: float = 1.05) -> tuple[float, float]:
    top = SCALE_MAX.get(scale or "", 1.0)
    low = min([0.0, *(r["ci_low"] for r in rows if r.get("ci_low") is not None)])
    return (low - 0.02 * top if low < 0 else 0.0), top * room


def ordered_slices(dimension: str, rows: Sequence[dict[str, Any]], limit: int = MAX_SLICES) -> list[str]:
    """The slices to chart: tags by how many cases they hold (the `limit` largest), others by name."""
    sizes: dict[str, int] = {}
    for r in rows:
        sizes[r["slice"]] = max(sizes.get(r["slice"], 0), r["n"] or 0)
    if dimension == "tag":
        return sorted(sizes, key=lambda s: (-sizes[s], s))[:limit]
    return sorted(sizes, key=lambda s: (DIFFICULTY_ORDER.get(s, 9), s))


def _bars(ax: Any, ys: Sequence[float], cells: Sequence[dict[str, Any] | None], color: str, height: float) -> list:
    """Horizontal bars (mean, 95% CI whisker) at `ys` for the cells that exist; returns those cells."""
    shown = [(y, c) for y, c in zip(ys, cells) if c]
    ax.barh(
        [y for y, _ in shown],
        [c["mean"] for _, c in shown],
        color=color,
        height=height,
        xerr=_whiskers([c for _, c in shown], "mean"),
        error_kw=WHISKER,
    )
    return [c for _, c in shown]


@_styled
def breakdown_chart(
    dimension: str,
    rows: Sequence[dict[str, Any]],
    metrics: Sequence[str],
    info: dict[str, dict[str, Any]],
    salt: str,
    baseline: Sequence[dict[str, Any]] | None = None,
) -> str | None:
    """Small multiples: one panel per metric, one bar per slice (mean, 95% CI whisker, n at the end); with
    `baseline` (its metric_ci rows), the baseline's bar (grey) above the candidate's on each slice."""
    rows = [r for r in rows if r["metric"] in metrics and r["mean"] is not None]
    metrics = [m for m in metrics if any(r["metric"] == m for r in rows)]
    slices = ordered_slices(dimension, rows)
    if not metrics or not slices:
        return None
    by_key = {(r["metric"], r["slice"]): r for r in rows}
    base = {(r["metric"], r["slice"]): r for r in baseline or () if r["mean"] is not None}
    lines = math.ceil(len(metrics) / PANEL_COLUMNS)
    cols = math.ceil(len(metrics) / lines)
    labels = [label(s) for s in slices]
    fig, axes = _grid(labels, lines, cols, panel_w=2.3, titled=True, row_h=0.36 if baseline is not None else 0.22)
    ys = list(range(len(slices)))
    for ax, metric in zip(axes.flat, metrics):
        cells = [by_key.get((metric, s)) for s in slices]
        if baseline is None:
            shown = _bars(ax, ys, cells, BAR, 0.7)
        else:
            before = _bars(ax, [y - 0.2 for y in ys], [base.get((metric, s)) for s in slices], BASELINE, 0.38)
            shown = before + _bars(ax, [y + 0.2 for y in ys], cells, BAR, 0.38)
        x0, x1 = _limits(info.get(metric, {}).get("scale"), shown, room=1.3)
        ax.set_xlim(x0, x1)
        ax.set_xticks(_ticks(x0, info.get(metric, {}).get("scale")))
        for y, c in zip(ys, cells):
            ax.text(x1, y, f"n={c['n']}" if c else "–", ha="right", va="center", fontsize=6.5, color="#555555")
        ax.set_title(metric + arrow(info.get(metric, {}).get("higher_is_better")), loc="left")
        ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
        ax.set_axisbelow(True)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    axes[0][0].set_yticks(ys, labels=labels)
    axes[0][0].set_ylim(len(ys) - 0.5, -0.5)  # top to bottom
    return _svg(fig, salt)


@_styled
def overall_chart(rows: Sequence[dict[str, Any]], salt: str) -> str | None:
    """The run's metrics on a 0–1 scale: mean with its 95% CI, in the order given."""
    rows = [r for r in rows if r["mean"] is not None and r.get("scale") in ("0-1", "binary", "cosine")]
    if not rows:
        return None
    labels = [r["metric"] + arrow(r["higher_is_better"]) for r in rows]
    fig, axes = _grid(labels, 1, 1, panel_w=5.0, xlabel=True)
    ax, ys = axes[0][0], list(range(len(rows)))
    ax.barh(ys, [r["mean"] for r in rows], color=BAR, height=0.7, xerr=_whiskers(rows, "mean"), error_kw=WHISKER)
    ax.set_yticks(ys, labels=labels)
    ax.set_ylim(len(ys) - 0.5, -0.5)
    ax.set_xlim(*_limits("0-1", rows))
    ax.set_xticks(_ticks(0.0, "0-1"))
    ax.set_xlabel("mean over the cases scored ok, with its 95% bootstrap CI")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return _svg(fig, salt)


@_styled
def diff_chart(rows: Sequence[dict[str, Any]], salt: str) -> str | None:
    """Candidate minus baseline per metric (overall), with the 95% CI of the paired sign-flip test (McNemar's
    for 0/1 metrics; sql/compare_runs.sql's ci_low, ci_high): red where the verdict is worse, green where
    it is better, grey otherwise."""
    rows = [r for r in rows if r["diff"] is not None]
    if not rows:
        return None
    labels = [r["metric"] + arrow(r["higher_is_better"]) for r in rows]
    fig, axes = _grid(labels, 1, 1, panel_w=5.0, xlabel=True)
    ax, ys = axes[0][0], list(range(len(rows)))
    colors = [REGRESSION if r["regression"] else IMPROVEMENT if r["improvement"] else NEUTRAL for r in rows]
    ax.barh(ys, [r["diff"] for r in rows], color=colors, height=0.7, xerr=_whiskers(rows, "diff"), error_kw=WHISKER)
    ax.axvline(0, color="#333333", linewidth=0.8)
    ax.set_yticks(ys, labels=labels)
    ax.set_ylim(len(ys) - 0.5, -0.5)
    ax.set_xlabel("Δ = candidate − baseline (paired by case), with its 95% CI (paired sign-flip test)")
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    return _svg(fig, salt)
