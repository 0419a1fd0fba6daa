"""`raglake metaeval`: how far the metrics (and a judge) agree with people on labelled sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

from raglake import prefect_settings
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import LakeOpt, app, split_option
from raglake.cli.jobs import JUDGE_LIMITS, _judge_values
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.metaeval.plan import MetaevalSettings, save_items
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import build

Data = Annotated[
    Optional[list[Path]],
    typer.Option("--data", help="Labelled JSONL file(s) (docs/metaeval.md); default: the shared sets, converted."),
]
Source = Annotated[
    Optional[Path], typer.Option(help="The shared metaeval folder (default: ../shared/metaeval beside the checkout).")
]
Datasets = Annotated[Optional[list[str]], typer.Option("--datasets", help="Only these data sets (comma-separated).")]
MaxItems = Annotated[int, typer.Option(help="Items per data set: a fixed-seed sample of whole groups (0: every item).")]


@app.command()
def metaeval(
    data: Data = None,
    source: Source = None,
    datasets: Datasets = None,
    max_items: MaxItems = 400,
    seed: Annotated[int, typer.Option(help="Seed of the sample and of the bootstrap.")] = 0,
    resamples: Annotated[int, typer.Option(help="Bootstrap resamples per interval.")] = 1000,
    metrics: opt.Metrics = None,
    lake: LakeOpt = None,
    metaeval_id: Annotated[Optional[str], typer.Option(help="Id of this meta-evaluation.")] = None,
    embedder: opt.Embedder = None,
    device: opt.Device = "auto",
    theta_h: opt.ThetaH = 0.7,
    judge: opt.Judge = None,
    judge_base_url: opt.JudgeBaseUrl = None,
    judge_model: opt.JudgeModel = None,
    judge_api_key_env: opt.JudgeApiKeyEnv = "OPENAI_API_KEY",
    judge_concurrency: opt.JudgeConcurrency = 8,
    judge_rpm: opt.JudgeRpm = None,
    judge_tpm: opt.JudgeTpm = None,
    judge_timeout: opt.JudgeTimeout = 60.0,
    judge_max_calls: opt.JudgeMaxCalls = None,
    judge_max_cost: opt.JudgeMaxCost = None,
    results: opt.Results = None,
    export: Annotated[
        Optional[Path], typer.Option(help="Only write the data sets as labelled JSONL files into this folder.")
    ] = None,
    show: Annotated[
        Optional[str], typer.Option(help="Only print a landed meta-evaluation's table (its id, or 'latest').")
    ] = None,
    verbose: opt.Verbose = False,
    quiet: opt.Quiet = False,
) -> None:
    """Hold the metrics with a human yardstick (and a judge, when given) against labelled sets: Spearman /
    Pearson, AUROC / balanced accuracy, accuracy / κ with 95% bootstrap intervals, landed in the lake."""
    settings = _settings(dict(locals()))
    if show is not None:
        print_metaeval(lake, "" if show == "latest" else show)
        return
    if export is not None:
        for name, n in save_items(export, settings).items():
            render.console.print(f"{export / (name + '.jsonl')}: {n} items", highlight=False)
        return
    prefect_settings.apply(verbose=verbose)
    from raglake.cli import flowrun  # here, not at the top: commands that only read the lake never import Prefect

    the_id = flowrun.run_metaeval(settings, quiet=quiet)
    print_metaeval(lake, the_id)


def _settings(p: dict[str, Any]) -> MetaevalSettings:
    """The command's options as MetaevalSettings (a bad value is a ConfigError naming its option)."""
    limits = {field: p[option] for field, option in JUDGE_LIMITS.items()}
    return build(
        MetaevalSettings,
        data=[str(d) for d in p["data"]] if p["data"] else None,
        source=str(p["source"]) if p["source"] else None,
        datasets=split_option(p["datasets"]) or None,
        max_items=p["max_items"] or None,
        scoring={"theta_h": p["theta_h"]},
        judge=_judge_values(p["judge"], p["judge_base_url"], p["judge_model"], limits),
        metrics=split_option(p["metrics"]) or None,
        **{name: p[name] for name in ("seed", "resamples", "lake", "results", "metaeval_id", "embedder", "device")},
    )


def print_metaeval(lake: str | None, metaeval_id: str) -> None:
    q = open_lake(lake)
    try:
        rows = run_query(q.con, "metaeval", metaeval_id=metaeval_id).to_pylist()
    finally:
        q.con.close()
    if not rows:
        raise ConfigError(f"no meta-evaluation {metaeval_id or '(none yet)'} in the lake {q.lake.url}")
    shown = [r for r in rows if r["status"] != "skipped"]  # the skipped ones are one line below
    if shown:
        render.console.print(metaeval_table(shown, rows[0]["metaeval_id"]))
    sampled = sorted({r["dataset"] for r in rows if r["n_total"] and r["split"] == "all" and _sampled(r)})
    if sampled:
        render.console.print(
            f"sampled (whole groups, seed {rows[0]['sample_seed']}; n shows used/total): {', '.join(sampled)}",
            highlight=False,
        )
    skipped = sorted({r["metric"] for r in rows if r["status"] == "skipped"})
    if skipped:
        render.console.print(
            f"skipped (no judge configured): {', '.join(skipped)}; give --judge-base-url and --judge-model, "
            "or --judge local",
            highlight=False,
        )


def _sampled(row: dict[str, Any]) -> bool:
    return row["n"] + row["n_failed"] < row["n_total"]


def metaeval_table(rows: list[dict[str, Any]], metaeval_id: str) -> Table:
    table = Table(title=f"meta-evaluation {metaeval_id}: agreement with people (95% bootstrap CI)")
    cells = [_cells(r) for r in rows]
    names = ("dataset", "split", "n", "metric", "statistic", "figure", "95% CI", "note")
    for i, name in enumerate(names):  # numbers and metric names stay whole; the rest folds when the width is short
        number = name in ("n", "metric", "figure", "95% CI")
        table.add_column(
            name,
            justify="right" if name in ("n", "figure") else "left",
            no_wrap=number,
            overflow="fold",
            min_width=max((len(c[i]) for c in cells), default=0) if number else None,
        )
    for c in cells:
        table.add_row(*c)
    return table


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    ci = f"[{render.fmt(r['ci_low'])}, {render.fmt(r['ci_high'])}]" if r["ci_low"] is not None else ""
    figure = render.fmt(r["value"])  # the one rounding: never -0.000
    note = r["status"] if r["status"] != "ok" else ""
    if r["reason"]:
        note += f" ({r['reason']})"
    if r["n_failed"]:
        note += f" {r['n_failed']} without a value"
    n = f"{r['n']}" + (f"/{r['n_total']}" if r["split"] == "all" and _sampled(r) else "")
    return r["dataset"], r["split"], n, r["metric"], r["statistic"], figure, ci, note.strip()
