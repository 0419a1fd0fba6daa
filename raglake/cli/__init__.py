"""The `raglake` command line: run evaluations and ask the lake questions."""

from __future__ import annotations

import os
import sys

from raglake.cli import jobs, queries, render, report, tools  # noqa: F401  (importing registers the commands)
from raglake.cli.common import app, print_comparison, print_run_summary  # noqa: F401
from raglake.errors import RaglakeError


def main() -> None:
    # raglake runs offline by default: Prefect's ephemeral server must not try to phone home, and on a
    # busy 2-core machine it may need more than Prefect's default 20 s to start
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    try:
        app()
    except RaglakeError as e:
        render.console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)
