"""Commands that ask the lake: runs, breakdowns, comparisons, health, coverage, trend, SQL."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from raglake.analysis import (
    COMPARE_DIMENSIONS,
    DEFAULT_FDR,
    DIMENSIONS,
    check_dimension,
    latest_per_target,
    missing_lake,
    parse_fdr,
)
from raglake.cli import render, sql_run
from raglake.cli.common import (
    LakeOpt,
    app,
    headline_metrics,
    print_comparison,
    split_option,
)
from raglake.lake.calls import drift_note, judge_drift
from raglake.pipeline.lakes import open_lake


@app.command()
def runs(lake: LakeOpt = None, limit: Annotated[int, typer.Option(help="How many runs to list.")] = 50) -> None:
    """List the runs in the lake, newest first."""
    q = open_lake(lake)
    rows = q.runs(limit)
    if not rows and (missing := missing_lake(q.lake)):
        raise missing
    render.console.print(render.runs_table(rows, render.console.width))


@app.command()
def breakdown(
    run: Annotated[
        Optional[list[str]],
        typer.Option(
            "--run",
            "-r",
            help=(
                "Run id, prefix, 'latest' or 'latest~N'; repeatable. "
                "Default: latest (with --by target: the latest run of every target)."
            ),
        ),
    ] = None,
    by: Annotated[str, typer.Option(help=f"One of {', '.join(DIMENSIONS)}.")] = "category",
    metrics: Annotated[
        Optional[list[str]],
        typer.Option("--metrics", "-m", help="Metrics to show (default: the registry's headline metrics)."),
    ] = None,
    long: Annotated[bool, typer.Option("--long", help="One row per slice × metric, with status counts.")] = False,
    lake: LakeOpt = None,
) -> None:
    """Every case-level metric of a run by slice: n and mean."""
    check_dimension(by)
    q = open_lake(lake)
    run_ids = q.run_ids(run) if run else (latest_per_target(q.con) if by == "target" else q.run_ids(["latest"]))
    if not run_ids and (missing := missing_lake(q.lake)):  # --by target on a lake that is not there
        raise missing
    chosen = split_option(metrics)
    q.check_metrics(chosen)
    rows = q.breakdown(run_ids, by)
    if long:
        shown = [r for r in rows if r["metric"] in chosen] if chosen else rows
        render.console.print(render.rows_table(shown, f"breakdown by {by}", 5000))
        return
    title = f"breakdown by {by}: mean (n) · runs {', '.join(run_ids)}"
    render.console.print(render.pivot_table(rows, headline_metrics(rows, chosen), title))


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="Baseline run (id, prefix or latest~N).")],
    run_b: Annotated[str, typer.Argument(help="Candidate run.")],
    by: Annotated[
        str, typer.Option(help=f"Slice dimension to show: {', '.join(COMPARE_DIMENSIONS)} or 'any'.")
    ] = "all",
    changes: Annotated[bool, typer.Option("--changes", help="Only the rows whose difference is real.")] = False,
    fdr: Annotated[
        str,
        typer.Option(
            "--fdr",
            help=(
                "False discovery rate of the verdicts (Benjamini-Hochberg across every metric × slice test), "
                "or 'off' for each slice's own uncorrected 95% interval."
            ),
        ),
    ] = str(DEFAULT_FDR),
    lake: LakeOpt = None,
) -> None:
    """Run B against run A per metric and slice: a paired test and 95% interval per slice, and verdicts
    with the false discovery rate controlled across all of them."""
    if by != "any":
        check_dimension(by, COMPARE_DIMENSIONS)
    level = parse_fdr(fdr)
    q = open_lake(lake)
    a, b = q.run_ids([run_a])[0], q.run_ids([run_b])[0]
    print_comparison(q, a, b, by=by, only_changes=changes, fdr=level)
    for note in map(drift_note, judge_drift(q.con, [a, b])):  # the model behind a judge name changed
        render.console.print(f"note: {note}", style="yellow", markup=False, highlight=False)


@app.command()
def health(
    run: Annotated[
        Optional[list[str]], typer.Option("--run", "-r", help="Run id, prefix or latest~N; repeatable.")
    ] = None,
    by: Annotated[str, typer.Option(help=f"One of {', '.join(DIMENSIONS)}.")] = "all",
    lake: LakeOpt = None,
) -> None:
    """Capture failures by slice: error, timeout and empty-answer rates, and abstentions."""
    check_dimension(by)
    q = open_lake(lake)
    run_ids = q.run_ids(run or ["latest"])
    render.console.print(render.rows_table(q.capture_health(run_ids, by), f"capture health by {by}", 2000))


@app.command()
def coverage(
    run: Annotated[
        Optional[str],
        typer.Option(
            "--run", "-r", help="Run id, prefix or latest~N. Default: the latest run that has an index manifest."
        ),
    ] = None,
    lake: LakeOpt = None,
) -> None:
    """The index manifest of a run: docs and chunks processed, skipped (with reasons), tokens per chunk."""
    q = open_lake(lake)
    run_id = q.run_ids([run or "latest"])[0]
    rows = q.coverage(run_id)
    if not rows and run is None:  # a replay run has none: the latest run whose target exposes one
        found = next(((r["run_id"], c) for r in q.runs() if (c := q.coverage(r["run_id"]))), None)
        if found is not None:
            render.console.print(
                f"the latest run, {run_id} ({q.target_name(run_id)}), has no index manifest; "
                f"the latest run that has one is {found[0]} ({q.target_name(found[0])}):"
            )
            run_id, rows = found
    if not rows:
        render.console.print(f"run {run_id} has no index manifest (its target, {q.target_name(run_id)}, exposes none)")
        return
    title = f"index coverage · run {run_id} · index_version {rows[0]['index_version']}"
    render.console.print(render.coverage_table(rows, title))
    figures = [
        f
        for f in q.figures([run_id])
        if f["metric"] in ("no_chunks_rate", "chunks_skipped_rate", "coverage_by_doc_type")
    ]
    if figures:
        render.console.print(render.figures_table(figures, "coverage figures"))


@app.command()
def trend(
    metric: Annotated[Optional[str], typer.Option(help="One metric (default all).")] = None,
    target: Annotated[Optional[str], typer.Option(help="Only runs of this target.")] = None,
    by: Annotated[str, typer.Option(help="Slice dimension.")] = "all",
    lake: LakeOpt = None,
) -> None:
    """A metric over runs, oldest first."""
    q = open_lake(lake)
    rows = q.trend(metric, target, None, by)
    if not rows and (missing := missing_lake(q.lake)):
        raise missing
    render.console.print(render.rows_table(rows, "trend", 5000))


@app.command()
def sql(
    query: Annotated[
        str,
        typer.Argument(
            help=(
                "A SELECT over the lake views (runs, cases, chunks, scores, scores_latest, labels, coverage, "
                "run_metrics, case_slices, metrics)."
            )
        ),
    ],
    lake: LakeOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print every row as a JSON line, as they come, instead of a table.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0, help="Stop the query after this many seconds (0: never); Ctrl-C stops it too."
        ),
    ] = 300,
) -> None:
    """Run SQL over the lake and print the result: a table of the first 1,000 rows, or every row with --json."""
    sql_run.run(open_lake(lake).con, query, as_json=as_json, timeout=timeout)
