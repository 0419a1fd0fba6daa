"""The printed figures of benchmarks/cold_start.py: a section's walls, where each tool's time goes, the values'
agreement, and the goals of issue 29 judged on the measured numbers."""

from __future__ import annotations

import argparse
import statistics

GOAL_CALM = 0.8  # cold smallest-N wall, raglake / ragas, calm machine, at most
GOAL_BUSY = 1.0  # the same with one core busy, at most
GOAL_FIXED_S = 2.0  # fixed start-up: cold process wall - a warm call on fresh rows of the same size, at most
GOAL_WARM_S = 0.3  # a warm call's fixed cost: the same rows again, every vector cached, at most


def _verdict(value: float, goal: float) -> str:
    return "met" if value <= goal else "NOT met"


def _best_median(values: list[float]) -> tuple[float, float]:
    return min(values), statistics.median(values)


def _mark(runs: list[dict], key: str) -> float:
    """The median of one mark over the runs (nan where a run lacks it)."""
    return statistics.median(r["marks"].get(key, float("nan")) for r in runs)


def _raglake_time(runs: list[dict], start: float) -> str:
    seconds: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        for key, value in r["seconds"].items():
            seconds.setdefault(key, []).append(value)
    stages = ", ".join(f"{s} {statistics.median(v):.2f}" for (m, s), v in seconds.items() if m == "stage_seconds")
    suite = statistics.median(seconds.get(("suite_seconds", ""), [float("nan")]))
    evaluated = _mark(runs, "evaluate")
    exit_s = statistics.median(r["wall"] - r["marks"]["evaluate"] for r in runs) - start
    return (
        f"      raglake's time (medians): import raglake {_mark(runs, 'import'):.2f} s, evaluate() returned at "
        f"{evaluated:.2f} s (the run's suite {suite:.2f} s: {stages}); interpreter start {start:.2f} s; "
        f"exit after evaluate() {exit_s:.2f} s"
    )


def _ragas_time(runs: list[dict], start: float) -> str:
    exit_s = statistics.median(r["wall"] - r["marks"]["evaluate"] for r in runs) - start
    return (
        f"      ragas' time (medians): import ragas and langchain-huggingface {_mark(runs, 'import'):.2f} s, "
        f"embeddings built (model loaded) at {_mark(runs, 'model'):.2f} s, evaluate() returned at "
        f"{_mark(runs, 'evaluate'):.2f} s; interpreter start {start:.2f} s; exit after evaluate() {exit_s:.2f} s"
    )


def _agreement(ours: list[dict], theirs: list[dict]) -> str:
    """max |raglake - ragas| over every case of every repetition where ragas' cosine is >= 0 (raglake clips a
    negative cosine to 0); the pairs are the same rows (same repetition, same N)."""
    diffs = [
        abs(a["values"][case] - s)
        for a, b in zip(ours, theirs)
        for case, s in b["values"].items()
        if s >= 0 and case in a["values"]
    ]
    missing = sum(len(b["values"]) for b in theirs) - len(diffs)
    return f"      values: max |raglake - ragas| {max(diffs, default=float('nan')):.1e} over {len(diffs)} cases" + (
        f" ({missing} left out: a negative cosine, or a case raglake did not score)" if missing else ""
    )


def _tool_line(n: int, tool: str, runs: list[dict]) -> str:
    best, median = _best_median([r["wall"] for r in runs])
    walls = ", ".join(f"{r['wall']:.2f}" for r in runs)
    return f"  cold {n} cases, {tool:<8} wall best {best:6.2f} s  median {median:6.2f} s   (walls {walls})"


def _ragas_lines(n: int, ours: list[dict], theirs: list[dict], ragas: str | None, start: float) -> list[str]:
    if not ragas:
        return [f"  cold {n} cases, ragas    ragas not installed: skipped"]
    if not theirs or "error" in theirs[-1]:
        return [f"  cold {n} cases, ragas    failed:", theirs[-1]["error"] if theirs else "no run"]
    (ob, om), (tb, tm) = _best_median([r["wall"] for r in ours]), _best_median([r["wall"] for r in theirs])
    return [
        _tool_line(n, "ragas", theirs),
        f"  cold {n} cases, raglake / ragas   best {ob / tb:.3f}   median {om / tm:.3f}   (ragas {theirs[0]['ragas']})",
        _ragas_time(theirs, start),
        _agreement(ours, theirs),
    ]


def _warm_lines(warm: list[dict], n: int, fresh_home: bool) -> list[str]:
    warm_call, cached = (_best_median([r["marks"][k] for r in warm]) for k in ("warm_call", "cached_call"))
    first, *later = (r["marks"]["call"] for r in warm)
    where = "in a new, empty PREFECT_HOME, as on a clean CI runner" if fresh_home else "in $PREFECT_HOME"
    return [
        f"  warm process, {n} cases a call (best / median of {len(warm)}): a warm call on fresh rows "
        f"{warm_call[0]:.2f} / {warm_call[1]:.2f} s, the same rows again (every vector cached) {cached[0]:.2f} / "
        f"{cached[1]:.2f} s",
        f"      those processes' first calls: {first:.2f} s ({where})"
        + (f", then {', '.join(f'{c:.2f}' for c in later)} s" if later else ""),
    ]


def report_section(label: str, data: dict, args: argparse.Namespace, ragas: str | None, loads: tuple) -> list[str]:
    """A section's lines: per N, each tool's walls, the ratio, where the time goes, the values' agreement."""
    lines = ["", f"{label}: load average (1, 5, 15 min) before {loads[0]}, after {loads[1]}"]
    start = data["start"]
    for n in args.cases:
        ours, theirs = data[n]["raglake"], data[n]["ragas"]
        lines += [_tool_line(n, "raglake", ours), _raglake_time(ours, start["raglake"])]
        lines += _ragas_lines(n, ours, theirs, ragas, start.get("ragas", float("nan")))
    if data["warm"]:
        lines += _warm_lines(data["warm"], min(args.cases), data["fresh_home"])
    return lines


def _ratio_goal(results: dict, label: str, n: int, goal: float, ragas: str | None) -> str:
    head = f"  cold {n} cases, raglake / ragas, {label}:"
    if label not in results:
        return f"{head} not measured (--no-busy)"
    ours, theirs = results[label][n]["raglake"], results[label][n]["ragas"]
    if not ragas or not theirs or "error" in theirs[-1]:
        return f"{head} no ragas figure (goal <= {goal:g}: not judged)"
    (ob, om), (tb, tm) = _best_median([r["wall"] for r in ours]), _best_median([r["wall"] for r in theirs])
    return f"{head} {ob / tb:.3f} (median {om / tm:.3f})   goal <= {goal:g}: {_verdict(ob / tb, goal)}"


def report_goals(results: dict, args: argparse.Namespace, ragas: str | None) -> list[str]:
    """Issue 29's goals beside the figures, judged on the best of the repetitions (medians in brackets)."""
    n = min(args.cases)
    calm = results["calm"]
    cold = _best_median([r["wall"] for r in calm[n]["raglake"]])
    warm = _best_median([r["marks"]["warm_call"] for r in calm["warm"]])
    cached = _best_median([r["marks"]["cached_call"] for r in calm["warm"]])
    fixed = (cold[0] - warm[0], cold[1] - warm[1])
    to_result = _best_median([r["marks"]["evaluate"] for r in calm[n]["raglake"]])
    return [
        "",
        f"goals (issue 29; best of {args.repeat}, median in brackets):",
        _ratio_goal(results, "calm", n, GOAL_CALM, ragas),
        _ratio_goal(results, "one core busy", n, GOAL_BUSY, ragas),
        f"  fixed start-up: cold {n}-case process wall {cold[0]:.2f} s - a warm call {warm[0]:.2f} s = "
        f"{fixed[0]:.2f} s (median {fixed[1]:.2f})   goal <= {GOAL_FIXED_S:g} s: {_verdict(fixed[0], GOAL_FIXED_S)}",
        f"      of it before the result (evaluate() returned {to_result[0]:.2f} s into the process - the warm call): "
        f"{to_result[0] - warm[0]:.2f} s (median {to_result[1] - warm[1]:.2f}); the rest is the interpreter's start "
        "and its exit after evaluate() (the user's process: raglake cannot skip it)",
        f"  a warm call's fixed cost (the same {n} rows again, every vector cached): {cached[0]:.2f} s "
        f"(median {cached[1]:.2f})   goal <= {GOAL_WARM_S:g} s: {_verdict(cached[0], GOAL_WARM_S)}",
    ]
