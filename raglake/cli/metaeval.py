"""`raglake metaeval`: how far the metrics (and a judge) agree with people on labelled sets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from raglake import prefect_settings
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import app, split_option
from raglake.cli.metaeval_table import metaeval_lines, repeated_line
from raglake.cli.settings_options import with_settings_options
from raglake.config.front import settings_for
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.metaeval.download import download as fetch_sets
from raglake.metaeval.plan import MetaevalSettings, check_data, save_items
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
    download: Annotated[
        bool,
        typer.Option(
            "--download",
            help="Only fetch the public labelled sets (pinned commits, each file checked by sha256) into --source "
            "(default ~/.cache/raglake/metaeval, where later runs find them).",
        ),
    ] = False,
    mirror: Annotated[
        Optional[str],
        typer.Option(help="With --download: fetch URL/<file> from a copy of the folder instead of GitHub."),
    ] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Print every row, also those that repeat another (e.g. AUROC of 0/1 values).")
    ] = False,
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
        print_metaeval(chosen.lake, "" if show == "latest" else show, every)
        return
    if mirror is not None and not download:
        raise ConfigError("--mirror goes with --download (where to fetch the public sets from)")
    if download:
        folder = fetch_sets(chosen.source, mirror, chosen.datasets, _say)
        hint = "raglake metaeval" + ("" if chosen.source is None else f" --source {folder}")
        render.console.print(f"the public sets are in {folder}; measure with: {hint}", highlight=False, markup=False)
        return
    if export is not None:
        for name, n in save_items(export, chosen).items():
            render.console.print(f"{export / (name + '.jsonl')}: {n} items", highlight=False)
        return
    check_data(chosen)  # one line saying what to pass, before Prefect starts
    prefect_settings.apply(verbose=verbose)
    from raglake.cli import flowrun  # here, not at the top: commands that only read the lake never import Prefect

    the_id = flowrun.run_metaeval(chosen, quiet=quiet)
    print_metaeval(chosen.lake, the_id, every)


def _say(line: str) -> None:
    render.console.print(line, highlight=False, markup=False)


def _settings(config: Path | None, judge: str | None, values: dict[str, Any]) -> MetaevalSettings:
    """The options as MetaevalSettings, with the eval file's lake, judge, embedder and own metrics when there
    is one (the options win); a bad value is a ConfigError naming its option."""
    if judge is not None and judge != "local":
        raise ConfigError(f"--judge takes 'local' (or give --judge-base-url and --judge-model), got {judge!r}")
    return settings_for(MetaevalSettings, config, {**values, "judge.local": True if judge else None}, SHARED)


SHARED = ("lake", "results", "embedder", "device", "judge")  # what a meta-evaluation takes from an eval file


def print_metaeval(lake: str | None, metaeval_id: str, every: bool = False) -> None:
    """A landed meta-evaluation, as raglake.cli.metaeval_table lays it out; `every`: the rows that repeat
    another too (sql/metaeval.sql's `repeats`)."""
    with open_lake(lake) as q:
        rows = run_query(q.con, "metaeval", metaeval_id=metaeval_id).to_pylist()
    if not rows:
        raise ConfigError(f"no meta-evaluation {metaeval_id or '(none yet)'} in the lake {q.lake.url}")
    measured = [r for r in rows if r["status"] != "skipped"]  # the skipped ones are one line below
    shown = [r for r in measured if every or not r["repeats"]]
    if shown:
        for line in metaeval_lines(shown, rows[0]["metaeval_id"], render.console.width):
            render.console.print(line, highlight=False)  # wrapped at spaces only: a name is never broken
    left_out = None if every else repeated_line(measured)
    if left_out:
        render.console.print(left_out, highlight=False, markup=False, style="dim")
    skipped = sorted({r["metric"] for r in rows if r["status"] == "skipped"})
    if skipped:
        render.console.print(
            f"skipped (no judge configured): {', '.join(skipped)}; give --judge-base-url and --judge-model, "
            "or --judge local",
            highlight=False,
            markup=False,
        )
