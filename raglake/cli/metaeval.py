"""`raglake metaeval`: how far the metrics (and a judge) agree with people on labelled sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from raglake import prefect_settings
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import app, split_option
from raglake.cli.settings_options import with_settings_options
from raglake.config.front import settings_for
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.metaeval.plan import MetaevalSettings, save_items
from raglake.pipeline.lakes import open_lake


@app.command()
@with_settings_options(MetaevalSettings)
def metaeval(
    config: opt.Config = None,
    judge: opt.Judge = None,
    export: Annotated[
        Optional[Path], typer.Option(help="Only write the data sets as labelled JSONL files into this folder.")
    ] = None,
    show: Annotated[
        Optional[str], typer.Option(help="Only print a landed meta-evaluation's table (its id, or 'latest').")
    ] = None,
    verbose: opt.Verbose = False,
    quiet: opt.Quiet = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Hold the metrics with a human yardstick (and a judge, when given) against labelled sets: Spearman /
    Pearson, AUROC / balanced accuracy, accuracy / κ with 95% bootstrap intervals, landed in the lake. The
    eval file's (raglake.yaml, or -c FILE) own metrics and rubrics with a yardstick are measured too."""
    values = {path: split_option(v) if isinstance(v, list) else v for path, v in (settings or {}).items()}
    chosen = _settings(config, judge, values)
    if show is not None:
        print_metaeval(chosen.lake, "" if show == "latest" else show)
        return
    if export is not None:
        for name, n in save_items(export, chosen).items():
            render.console.print(f"{export / (name + '.jsonl')}: {n} items", highlight=False)
        return
    prefect_settings.apply(verbose=verbose)
    from raglake.cli import flowrun  # here, not at the top: commands that only read the lake never import Prefect

    the_id = flowrun.run_metaeval(chosen, quiet=quiet)
    print_metaeval(chosen.lake, the_id)


def _settings(config: Path | None, judge: str | None, values: dict[str, Any]) -> MetaevalSettings:
    """The options as MetaevalSettings, with the eval file's lake, judge, embedder and own metrics when there
    is one (the options win); a bad value is a ConfigError naming its option."""
    if judge is not None and judge != "local":
        raise ConfigError(f"--judge takes 'local' (or give --judge-base-url and --judge-model), got {judge!r}")
    return settings_for(MetaevalSettings, config, {**values, "judge.local": True if judge else None}, SHARED)


SHARED = ("lake", "results", "embedder", "device", "judge")  # what a meta-evaluation takes from an eval file


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
    if r["reason"]:  # a judge's or a server's words: escaped, or rich would read `[/]` in them as markup
        note += f" ({escape(r['reason'])})"
    if r["n_failed"]:
        note += f" {r['n_failed']} without a value"
    n = f"{r['n']}" + (f"/{r['n_total']}" if r["split"] == "all" and _sampled(r) else "")
    return r["dataset"], r["split"], n, r["metric"], r["statistic"], figure, ci, note.strip()
