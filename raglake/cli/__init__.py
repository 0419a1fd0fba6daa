"""The `raglake` command line: run evaluations and ask the lake questions."""

from __future__ import annotations

import sys

from raglake import prefect_settings
from raglake.cli import jobs, queries, render, report, tools  # noqa: F401  (importing registers the commands)
from raglake.cli.common import app, print_comparison, print_run_summary  # noqa: F401
from raglake.embed.encoders import ENCODERS
from raglake.errors import RaglakeError
from raglake.pipeline.judging import JUDGE_RUNS


def main() -> None:
    # before anything can import Prefect (it reads its settings once, on import); see raglake.prefect_settings
    prefect_settings.apply()
    try:
        app()
    except RaglakeError as e:
        render.console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)
    finally:  # the command is over: the loaded models and any judge session go with it
        ENCODERS.clear()
        JUDGE_RUNS.clear()
