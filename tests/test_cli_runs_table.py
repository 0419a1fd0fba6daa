"""Issue 27: `raglake runs` split every run id and timestamp over four lines at 120 columns (ten columns
folded to fit). Now ids, timestamps, counts and statuses are never wrapped; names may fold; the least
important columns are left out at a narrow width (the caption says which); below even the id beside the
start time, each run takes two lines. Run as a user runs it: the command in a subprocess with $COLUMNS."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lakekit import MINI_GOLDEN, MINI_REPLAY, land

RUNS = {  # run id (as raglake names them: r-<start>-<target>-<6 hex>) -> minutes after the fixed start
    "r-20260101-000000-mini_replay-1a2b3c": 0,
    "r-20260101-001500-mini_replay-4d5e6f": 15,
}
STARTED = {
    "r-20260101-000000-mini_replay-1a2b3c": "2026-01-01 00:00:00",
    "r-20260101-001500-mini_replay-4d5e6f": "2026-01-01 00:15:00",
}


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("runs_table") / "lake")
    for run_id, minutes in RUNS.items():
        land(path, MINI_GOLDEN, MINI_REPLAY, run_id, minutes=minutes, metrics=["mrr_at_k"])
    return path


def _runs(lake: str, columns: int) -> list[str]:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        [sys.executable, "-m", "raglake", "runs", "--lake", lake], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def _header(lines: list[str]) -> list[str]:
    row = next(line for line in lines if line.startswith("┃"))
    return [c.strip() for c in row.strip("┃").split("┃")]


@pytest.mark.parametrize("columns", [120, 80])
def test_run_ids_and_timestamps_are_never_split(lake: str, columns: int) -> None:
    lines = _runs(lake, columns)
    assert all(len(line) <= columns for line in lines), columns
    for run_id, started in STARTED.items():  # the id and its start time whole, on the run's one line
        (row,) = [line for line in lines if run_id in line]
        assert started in row and "completed" in row
    body = [line for line in lines if line.startswith("│")]
    assert len(body) == len(RUNS)  # one line per run: nothing folded
    assert lines.index(next(line for line in body if "001500" in line)) < lines.index(
        next(line for line in body if "000000" in line)
    )  # newest first


def test_at_120_columns_the_names_and_counts_are_there_and_the_caption_names_what_is_not(lake: str) -> None:
    lines = _runs(lake, 120)
    header = _header(lines)
    assert header[:2] == ["run_id", "started_at"]
    assert {"target_name", "dataset_name", "n_cases", "status"} <= set(header)
    left_out = [c for c in ("finished_at", "k", "dataset_hash", "target_spec") if c not in header]
    caption = " ".join(" ".join(lines[lines.index(next(x for x in lines if x.startswith("└"))) + 1 :]).split())
    assert left_out and f"not shown at this width: {', '.join(left_out)}" in caption


def test_at_80_columns_the_least_important_go_first(lake: str) -> None:
    header = _header(_runs(lake, 80))
    assert header[:2] == ["run_id", "started_at"] and "status" in header
    assert "target_spec" not in header and "dataset_hash" not in header


def test_below_the_id_beside_its_start_each_run_takes_two_lines(lake: str) -> None:
    lines = _runs(lake, 50)
    assert all(len(line) <= 50 for line in lines)
    for run_id, started in STARTED.items():
        at = next(i for i, line in enumerate(lines) if run_id in line)
        assert re.search(rf"│ {started} · completed +│", lines[at + 1])


def test_an_empty_lake_folder_still_prints_the_columns(tmp_path: Path) -> None:
    (tmp_path / "lake" / "runs").mkdir(parents=True)
    lines = _runs(str(tmp_path / "lake"), 120)
    assert _header(lines)[:2] == ["run_id", "started_at"]


def test_every_generic_table_keeps_run_ids_and_timestamps_whole_at_120_and_80() -> None:
    """`raglake health`, `sql`, … print through render.arrow_table: an id or a timestamp is never cut or split
    (it was: 'r-20261127-165607-lo' in `health --by category` at 120 columns)."""
    import pyarrow as pa
    from rich.console import Console

    from raglake.cli import render

    run_id, when = "r-20261127-165607-local_search-9f3a2b", "2026-11-27 16:56:07"
    table = pa.table(
        {
            "run_id": [run_id] * 2,
            "slice": ["recency_conflict", "factual"],
            **{f"a_long_rate_name_{i}": [0.125, 0.5] for i in range(6)},
            "finished_at": [when] * 2,
        }
    )
    for width in (120, 80):
        console = Console(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        console.print(render.arrow_table(table, "health"))
        text = console.export_text()
        assert text.count(run_id) == 2 and text.count(when) == 2, text
