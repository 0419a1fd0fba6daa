"""What the commands share: the Typer app, common options, summaries and comparisons."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from raglake.analysis import DEFAULT_FDR, LakeQueries, verdict_headline, verdict_summary
from raglake.cli import render
from raglake.config.evalfile import find_eval_file, load_eval_file
from raglake.metrics.registry import all_metrics, repeated
from raglake.pipeline.settings import JudgeSettings
from raglake.report.data import registry_order

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="The `raglake` command line: run evaluations and ask the lake questions.",
    pretty_exceptions_enable=False,
)


def eval_file_lake(value: Optional[str]) -> Optional[str]:
    """--lake as given, else the lake of the eval file in the working folder (raglake.yaml), else None (then
    $RAGLAKE_LAKE or data/lake): in a project's folder its commands read the project's lake."""
    if value:
        return value
    found = find_eval_file(None)
    return load_eval_file(found).values.get("lake") if found is not None else None


# a command that reads an eval file of its own (-c) takes that file's lake, not the working folder's
FileLakeOpt = Annotated[
    Optional[str],
    typer.Option("--lake", help="Lake root (default: the eval file's lake, else $RAGLAKE_LAKE or data/lake)."),
]
LakeOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lake",
        callback=eval_file_lake,
        help="Lake root (default: the lake of raglake.yaml in the working folder, else $RAGLAKE_LAKE or data/lake).",
    ),
]


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


NO_JUDGE_HINT = (
    "{n} judge metric value(s) were skipped: no judge is configured. Configure one in the eval file "
    "(judge: {{base_url: URL, model: NAME}}) or with --judge-base-url URL --judge-model NAME (the key is read "
    f"from ${JudgeSettings.model_fields['api_key_env'].default}, or the variable named by --judge-api-key-env), "
    "or use --judge local for the bundled offline model."
)


def print_run_summary(q: LakeQueries, run_id: str) -> None:
    """The metrics with values as a table (one of two that give the same figure: the registry's
    `same_as`), then one line per group of metrics without any value (family, status and reason: "7 label
    metrics with no value: undefined on every case (no labels in the golden set)"), each said once (the
    no-judge and budget notes stand for their groups), then the run-level figures."""
    rows = registry_order([r for r in q.breakdown([run_id], "all") if r["n_rows"]])
    hidden = repeated({r["metric"] for r in rows if r["n"]})
    render.console.print(
        render.summary_table([r for r in rows if r["metric"] not in hidden], f"run {run_id} · {q.target_name(run_id)}")
    )
    no_judge = sum(r["n_skipped"] for r in rows if r["family"] == "judge" and r["main_reason"] == "no_judge")
    budget = sum(r["n_skipped"] for r in rows if r["main_reason"] == "budget")
    noted = {reason for reason, n in (("no_judge", no_judge), ("budget", budget)) if n}
    for line in render.unscored_lines([r for r in rows if r["main_reason"] not in noted]):
        render.console.print(line, highlight=False)
    if no_judge:
        render.console.print(NO_JUDGE_HINT.format(n=no_judge), style="dim", highlight=False)
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
    rows: list[dict] | None = None,
    headline: bool = True,
) -> list[dict]:
    """Run B against run A: the verdict first (unless `headline` is False: printed already), how many
    tests were made, the rows of `by` (with --changes: those the verdicts flag; the metrics identical on
    every pair in one line; one of two metrics that give the same figure) and, by default, the slices
    whose difference is real. `rows`: compare_runs' rows when the caller has them."""
    rows = registry_order(rows if rows is not None else q.compare(run_a, run_b, fdr=fdr))
    hidden = repeated({r["metric"] for r in rows})
    name_a, name_b = q.target_name(run_a), q.target_name(run_b)
    if headline:
        a, b = (run_a, run_b) if name_a == name_b else (name_a, name_b)  # one target: its runs' ids say which
        line = verdict_line(rows, f"B = {b} against A = {a}")
        render.console.print(line, style="bold", highlight=False, markup=False)
    versions = q.index_versions([run_a, run_b])
    if versions.get(run_a) != versions.get(run_b) and any(versions.values()):
        render.console.print(
            f"[yellow]note:[/] the index changed between the runs (index_version "
            f"{versions.get(run_a) or '–'} → {versions.get(run_b) or '–'}); see `raglake coverage`"
        )
    shown = [
        r
        for r in rows
        if (by == "any" or r["dimension"] == by)
        and (not only_changes or r["regression"] or r["improvement"])
        and r["metric"] not in hidden
    ]
    title = f"A = {name_a} ({run_a})  vs  B = {name_b} ({run_b})"
    render.console.print(verdict_summary(rows, fdr), highlight=False)
    same = [r for r in shown if r["why"] == "no case changed"]
    if same:
        names = sorted({r["metric"] for r in same})
        listed = ", ".join(names) if len(names) <= 4 else f"{', '.join(names[:4])} and {len(names) - 4} more"
        what = f"{len(names)} metric(s)" if by == "all" else f"{len(same)} metric × slice row(s)"
        render.console.print(f"{what} identical in both runs (every pair equal): {listed}", highlight=False)
    changed = [r for r in shown if r["why"] != "no case changed"]
    if changed or not same:
        render.console.print(render.comparison_table(changed, f"A: {name_a}", f"B: {name_b}", title))
    flagged = [r for r in rows if r["dimension"] != "all" and (r["regression"] or r["improvement"])]
    flagged = [r for r in flagged if r["metric"] not in hidden]
    if by == "all" and flagged:
        flagged.sort(key=lambda r: (not r["regression"], -abs(r["diff"])))
        rule = "uncorrected 95% CI excludes 0" if fdr is None else f"Benjamini-Hochberg, FDR {fdr:g}"
        title = f"slices where the difference is real ({rule}): {len(flagged)}"
        if len(flagged) > MAX_SLICE_ROWS:
            title += f", the {MAX_SLICE_ROWS} largest shown (all: raglake compare {run_a} {run_b} --by any --changes)"
        render.console.print(render.comparison_table(flagged[:MAX_SLICE_ROWS], f"A: {name_a}", f"B: {name_b}", title))
    return rows


def verdict_line(rows: list[dict], subject: str) -> str:
    """The comparison's verdict in one or two lines (analysis.verdict_headline), a metric that repeats
    another's figure left out."""
    hidden = repeated({r["metric"] for r in rows})
    return verdict_headline([r for r in rows if r["metric"] not in hidden], subject)


def comparisons(q: LakeQueries, run_ids: list[str]) -> list[tuple[str, str]]:
    """(A, B) of each comparison the runs get: every run against the first, or a lone run against the
    previous run of its target on its golden set (none for a first run)."""
    if len(run_ids) > 1:
        return [(run_ids[0], other) for other in run_ids[1:]]
    previous = q.previous_run(run_ids[0])
    return [(previous, run_ids[0])] if previous else []


def first_run_line(q: LakeQueries, run_id: str) -> str:
    return (
        f"verdict: the first run of {q.target_name(run_id)} on this golden set: nothing to compare with yet; "
        f"`raglake run` again after a change compares with it (or give two --target to compare them)"
    )


def print_runs(q: LakeQueries, run_ids: list[str]) -> None:
    """The verdict of each comparison first, then each run's summary, the comparisons' tables and the ids."""
    compared = {(a, b): registry_order(q.compare(a, b)) for a, b in comparisons(q, run_ids)}
    if not compared:
        render.console.print(first_run_line(q, run_ids[0]), style="bold", highlight=False, markup=False)
    for (a, b), rows in compared.items():
        subject = (
            f"against the previous run {a}"
            if len(run_ids) == 1
            else f"B = {q.target_name(b)} against A = {q.target_name(a)}"
        )
        render.console.print(verdict_line(rows, subject), style="bold", highlight=False, markup=False)
    for rid in run_ids:
        print_run_summary(q, rid)
    for (a, b), rows in compared.items():
        if len(run_ids) == 1:
            render.console.print(f"against the previous run of this target on this golden set ({a}):")
        print_comparison(q, a, b, rows=rows, headline=False)
    render.console.print(f"landed run(s): {' '.join(run_ids)}  (lake: {q.lake.url})")
