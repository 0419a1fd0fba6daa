"""What the commands share: the Typer app, common options, summaries and comparisons."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated, Optional

import typer

from raglake.analysis import DEFAULT_FDR, LakeQueries, verdict_headline, verdict_summary
from raglake.cli import interrupt, render
from raglake.judge.local import LOCAL_MODEL, LocalJudgeServer
from raglake.metrics.registry import all_metrics
from raglake.pipeline.settings import JudgeSettings
from raglake.report.data import registry_order

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="The `raglake` command line: run evaluations and ask the lake questions.",
    pretty_exceptions_enable=False,
)

LakeOpt = Annotated[Optional[str], typer.Option("--lake", help="Lake root (default $RAGLAKE_LAKE or data/lake).")]


MAX_SLICE_ROWS = 20


def split_option(values: Optional[list[str]]) -> list[str]:
    """The values of a repeatable, comma-separated option (`-m a,b -m c`), stripped, empty ones dropped."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def headline_metrics(rows: list[dict], chosen: list[str]) -> list[str]:
    """The metrics a table shows: those chosen, else the registry's headline metrics that have `ok`
    values in `rows` (when none has, every metric that has), in the registry's order."""
    if chosen:
        return chosen
    seen = {r["metric"] for r in rows if r["n"]}
    with_values = [m for m in all_metrics(level="case") if m.name in seen]
    return [m.name for m in with_values if m.headline] or [m.name for m in with_values]


LOCAL_JUDGE = dict(base_url="http://127.0.0.1:1/v1", model=LOCAL_MODEL, label="local")  # its port: once started


@contextlib.contextmanager
def judge_endpoint(judge: JudgeSettings | None) -> Iterator[JudgeSettings | None]:
    """The judge for the flow: a remote endpoint as given, or (label `local`) the local server, started
    for the run and stopped after it."""
    if judge is None or judge.label != "local":
        yield judge
        return
    render.console.print("starting the local judge (llama.cpp, SmolLM2-135M: weak, for a fully offline pipeline) …")
    server = LocalJudgeServer()
    with interrupt.cleanup(server.stop), server:  # an interrupted run stops it too
        # llama.cpp's server answers one request at a time on this CPU: queueing more only times them out
        yield judge.model_copy(
            update=dict(base_url=server.base_url, concurrency=1, timeout_s=max(judge.timeout_s, 600.0))
        )


NO_JUDGE_HINT = (
    "{n} judge metric value(s) were skipped: no judge is configured. Configure one with "
    "--judge-base-url URL --judge-model NAME (the key is read from $OPENAI_API_KEY, or the variable "
    "named by --judge-api-key-env), or use --judge local for the bundled offline model."
)


def print_run_summary(q: LakeQueries, run_id: str) -> None:
    """The metrics with values as a table, then one line per group of metrics without any (family,
    status and reason: "18 judge metrics skipped: no judge configured"), then the run-level figures."""
    rows = registry_order([r for r in q.breakdown([run_id], "all") if r["n_rows"]])
    render.console.print(render.summary_table(rows, f"run {run_id} · {q.target_name(run_id)}"))
    for line in render.unscored_lines(rows):
        render.console.print(line, highlight=False)
    no_judge = sum(r["n_skipped"] for r in rows if r["family"] == "judge" and r["main_reason"] == "no_judge")
    if no_judge:
        render.console.print(NO_JUDGE_HINT.format(n=no_judge), style="dim", highlight=False)
    budget = sum(r["n_skipped"] for r in rows if r["main_reason"] == "budget")
    if budget:
        render.console.print(f"[yellow]{budget} judge metric value(s) were skipped: the judge budget ran out.[/]")
    figures = [f for f in q.figures([run_id]) if f["metric"] != "stage_seconds"]
    if figures:
        render.console.print(render.figures_table(figures, "run-level figures"))


def print_comparison(
    q: LakeQueries,
    run_a: str,
    run_b: str,
    *,
    by: str = "all",
    only_changes: bool = False,
    fdr: float | None = DEFAULT_FDR,
) -> list[dict]:
    """Run B against run A: the rows of `by` (all of them with --changes: those the verdicts flag),
    how many tests were made and, by default, the slices whose difference is real."""
    rows = registry_order(q.compare(run_a, run_b, fdr=fdr))
    name_a, name_b = q.target_name(run_a), q.target_name(run_b)
    versions = q.index_versions([run_a, run_b])
    if versions.get(run_a) != versions.get(run_b) and any(versions.values()):
        render.console.print(
            f"[yellow]note:[/] the index changed between the runs (index_version "
            f"{versions.get(run_a) or '–'} → {versions.get(run_b) or '–'}); see `raglake coverage`"
        )
    shown = [
        r
        for r in rows
        if (by == "any" or r["dimension"] == by) and (not only_changes or r["regression"] or r["improvement"])
    ]
    title = f"A = {name_a} ({run_a})  vs  B = {name_b} ({run_b})"
    render.console.print(verdict_headline(rows), style="bold", highlight=False, markup=False)
    render.console.print(verdict_summary(rows, fdr), highlight=False)
    render.console.print(render.comparison_table(shown, f"A: {name_a}", f"B: {name_b}", title))
    flagged = [r for r in rows if r["dimension"] != "all" and (r["regression"] or r["improvement"])]
    if by == "all" and flagged:
        flagged.sort(key=lambda r: (not r["regression"], -abs(r["diff"])))
        rule = "uncorrected 95% CI excludes 0" if fdr is None else f"Benjamini-Hochberg, FDR {fdr:g}"
        title = f"slices where the difference is real ({rule}): {len(flagged)}"
        if len(flagged) > MAX_SLICE_ROWS:
            title += f", the {MAX_SLICE_ROWS} largest shown (all: raglake compare {run_a} {run_b} --by any --changes)"
        render.console.print(render.comparison_table(flagged[:MAX_SLICE_ROWS], f"A: {name_a}", f"B: {name_b}", title))
    return rows
