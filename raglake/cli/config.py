"""`raglake config check|schema` and `raglake init`: the eval file without running it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake import outputs
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import app
from raglake.config.evalfile import EVAL_FILE, schema
from raglake.config.front import resolve
from raglake.config.starter import starter_paths, starter_text
from raglake.errors import ConfigError
from raglake.golden import load_golden
from raglake.metrics.registry import get_metric
from raglake.pipeline.plan import plan_run

config_app = typer.Typer(help="The eval file (raglake.yaml): check it, or print its JSON Schema.", no_args_is_help=True)
app.add_typer(config_app, name="config")


def _say(text: str) -> None:
    render.console.print(text, highlight=False, markup=False, soft_wrap=True)


@config_app.command("check")
def check(config: opt.Config = None) -> None:
    """Validate the eval file and every input it names (golden set, targets, plugins, rubrics, assertions)
    without running anything or writing to the lake."""
    evaluation = resolve(config)
    if evaluation.file is None:
        raise ConfigError(f"no eval file: give -c FILE, or write {EVAL_FILE} here (`raglake init GOLDEN`)")
    for note in evaluation.notes:
        _say(f"note: {note}")
    for settings in evaluation.runs:
        plan = plan_run(settings)
        own = [m.name for m in plan.metrics if not get_metric(m.name).builtin]
        judge = plan.judge.model if plan.judge is not None else "none (judge metrics are skipped)"
        _say(
            f"{plan.target.spec}: {len(plan.golden.cases)} cases of {plan.golden.name}, {len(plan.metrics)} metrics"
            f" ({len(own)} of yours{': ' + ', '.join(own) if own else ''}), judge {judge}"
        )
    gate = f", gate: {len(evaluation.gate.rules)} rule(s)" if evaluation.gate is not None else ""
    _say(f"{evaluation.file.path}: ok ({len(evaluation.runs)} target(s){gate})")


@config_app.command("schema")
def schema_cmd() -> None:
    """Print the eval file's JSON Schema (editors complete and check raglake.yaml from it)."""
    print(json.dumps(schema(), indent=2, ensure_ascii=False))


@app.command()
def init(
    golden: Annotated[Path, typer.Argument(help="The golden set the evaluation is about.")],
    output: Annotated[
        Optional[Path], typer.Option("--output", "-o", help=f"The file to write (default: {EVAL_FILE} beside it).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing file.")] = False,
) -> None:
    """Write a commented starter eval file next to a golden set (its replay captures, if any, as targets)."""
    golden_set = load_golden(golden)  # a golden set that cannot be read is said now, not at the first run
    path = output or golden.parent / EVAL_FILE
    if path.exists() and not force:
        raise ConfigError(f"{path} exists already; give --force to replace it, or -o another file")
    with outputs.writing(path, "the eval file") as f:
        f.write(starter_text(*starter_paths(Path(golden).resolve(), path.resolve().parent)))
    _say(f"wrote {path} ({len(golden_set.cases)} cases in {golden}); check it: raglake config check -c {path}")
