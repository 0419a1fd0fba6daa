"""`raglake report`: write one self-contained HTML report about a run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from raglake.analysis import DEFAULT_FDR, parse_fdr
from raglake.cli import render
from raglake.cli.common import LakeOpt, app
from raglake.outputs import is_stdout
from raglake.pipeline.lakes import open_lake
from raglake.report.data import gather


@app.command()
def report(
    run: Annotated[str, typer.Argument(help="Run id, prefix, 'latest' or 'latest~N'.")],
    against: Annotated[
        str | None, typer.Option("--against", help="Baseline run to compare with (id, prefix or latest~N).")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="HTML file to write, or - for standard output (default: report-<run id>.html). Never written "
            "through a symbolic link, nor onto a folder or a device.",
        ),
    ] = None,
    worst: Annotated[int, typer.Option("--worst", help="Worst cases listed per headline metric (0: none).")] = 10,
    fdr: Annotated[
        str,
        typer.Option(
            "--fdr",
            help="With --against: false discovery rate of the comparison's verdicts (Benjamini-Hochberg), or 'off'.",
        ),
    ] = str(DEFAULT_FDR),
    lake: LakeOpt = None,
) -> None:
    """One self-contained HTML file (opens offline): headline metrics with 95% CIs, charts by slice,
    the comparison with a baseline, latency and cost, index coverage and the worst cases."""
    from raglake.report import html  # here, not at the top: only this command loads matplotlib and jinja2

    level = parse_fdr(fdr)
    q = open_lake(lake)
    run_id = q.run_ids([run])[0]
    baseline = q.run_ids([against])[0] if against else None
    path = html.check_output(output or Path(f"report-{_file_safe(run_id)}.html"))
    data = gather(q, run_id, baseline, worst=worst, fdr=level)
    path = html.write(data, path)
    if not is_stdout(path):  # standard output holds the report alone
        render.console.print(f"report: {path}", highlight=False, soft_wrap=True)


def _file_safe(run_id: str) -> str:
    """The run id as part of a file name in the working folder: a foreign lake's run id holding `/` must
    not name a path elsewhere (raglake's own run ids pass unchanged)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)[:128]
