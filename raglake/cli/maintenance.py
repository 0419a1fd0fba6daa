"""Commands that look after the lake and the results location: `doctor` (damaged or foreign files, and
`--quarantine` to move them aside) and `gc` (staged files no re-run or resume can use)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Optional

import typer

from raglake.cli import render
from raglake.cli.common import LakeOpt, app
from raglake.lake.doctor import QUARANTINE, examine, quarantine
from raglake.lake.store import Lake
from raglake.pipeline import gc as collector
from raglake.pipeline.plan import results_dir


def _say(text: str) -> None:
    render.console.print(text, highlight=False, markup=False, soft_wrap=True)


@app.command()
def doctor(
    lake: LakeOpt = None,
    move: Annotated[
        bool,
        typer.Option(
            "--quarantine",
            help=f"Move what is found under <lake>/{QUARANTINE}/<timestamp>/ (same relative paths, with a log); "
            "a run with a damaged file of its own moves whole. Nothing is deleted.",
        ),
    ] = False,
) -> None:
    """List the lake's damaged or foreign files with the reason (every Parquet file is read whole): exit 0
    when there is none, 1 when there are. Read-only, unless --quarantine."""
    the_lake = Lake(lake)
    findings = examine(the_lake)
    if not findings:
        _say(f"no problem found in the lake at {the_lake.url}")
        return
    if not move:
        for f in findings:
            _say(f"{f.path}: {f.reason}")
        _say(
            f"{len(findings)} problem(s) in the lake at {the_lake.url}; readers skip these files (a run with a "
            f"damaged file of its own is left out whole). `raglake doctor --quarantine` moves them under "
            f"{QUARANTINE}/ (nothing is deleted)."
        )
        raise typer.Exit(1)
    folder, log = quarantine(the_lake, findings)
    for entry in log:
        _say(f"moved {entry['path']}: {entry['reason']}")
    _say(f"moved {len(log)} file(s) to {folder} (what, why and when: {folder}/quarantine.jsonl)")


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


@app.command()
def gc(
    results: Annotated[
        Optional[str],
        typer.Option(help="The results location (default $RAGLAKE_RESULTS or <lake>/_results)."),
    ] = None,
    lake: LakeOpt = None,
    keep_days: Annotated[
        float, typer.Option(help="Keep staged work written or reused within this many days.", min=0.0)
    ] = collector.KEEP.days,
    apply: Annotated[bool, typer.Option("--apply", "--yes", help="Remove them (default: only list them).")] = False,
) -> None:
    """Remove from the results location what no re-run or resume can use (judge outcomes of committed runs,
    landed meta-evaluations' rows, leftovers of killed writes, work unused for --keep-days); lists what it
    would remove and the bytes, and removes it only with --apply."""
    the_lake = Lake(lake)
    where = results_dir(the_lake, results)
    garbage = collector.collect(where, the_lake, keep=dt.timedelta(days=keep_days))
    for g in garbage:
        _say(f"{g.path}  {_size(g.bytes)}  {g.why}")
    n_bytes = sum(g.bytes for g in garbage)
    total = f"{_size(n_bytes)} ({n_bytes} bytes)"
    if not garbage:
        _say(f"nothing to remove in {where}")
    elif apply:
        collector.remove(where, garbage)
        _say(f"removed {len(garbage)} item(s), {total}, from {where}")
    else:
        _say(f"would remove {len(garbage)} item(s), {total}, from {where} (dry run: `raglake gc --apply` removes them)")
