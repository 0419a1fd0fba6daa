"""The `raglake` command line: run evaluations and ask the lake questions."""

from __future__ import annotations

import atexit
import os
import sys
import threading

import typer.rich_utils

from raglake import prefect_settings
from raglake.cli import config, jobs, maintenance, metaeval, queries, render, report, tools, view  # noqa: F401  (importing registers the commands)
from raglake.cli.common import app, print_comparison, print_run_summary  # noqa: F401
from raglake.columnar.arrays import prefer_jemalloc
from raglake.embed import process
from raglake.embed.encoders import ENCODERS
from raglake.errors import RaglakeError
from raglake.pipeline.embedding import settle_early_loads
from raglake.pipeline.judging import JUDGE_RUNS


def main() -> None:
    # before anything can import Prefect (it reads its settings once, on import); see raglake.prefect_settings
    prefect_settings.apply()
    prefer_jemalloc()  # the run's peak memory (raglake.columnar.arrays)
    if typer.rich_utils.MAX_WIDTH is None:  # $TERMINAL_WIDTH, typer's own knob, wins
        typer.rich_utils.MAX_WIDTH = render.output_width()  # piped --help: full option names
    try:
        app()
    except RaglakeError as e:
        try:
            render.console.print(f"[bold red]error:[/] {e}", highlight=False)
        except OSError:  # standard output is what failed (`report -o - > /dev/full`): say it on stderr
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    finally:  # the command is over: the loaded models and any judge session go with it
        process.discard_early()  # a model process raglake.command started on a guess that no run took
        settle_early_loads()
        ENCODERS.clear()
        JUDGE_RUNS.clear()


def console() -> None:
    """The `raglake` command (console script and `python -m raglake`): main(), then a prompt exit. What the
    interpreter does at exit is done (every atexit handler: Prefect's server stopped, logs flushed, temporary
    folders removed; the standard streams flushed), but not its tearing down of every module and object,
    ~0.7 s with torch, pandas and Prefect loaded (issue 29). A thread still running gets the ordinary exit."""
    try:
        main()
        code: object = 0
    except SystemExit as e:
        code = e.code
    code = 0 if code is None else code
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
    if not isinstance(code, int) or others:
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or full standard stream: the exit status Python gives it
            code = code or 120
    os._exit(code)
