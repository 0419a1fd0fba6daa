"""Verdict first, noise last on the command line: metrics with no value folded into one line per
group, tables that fit the terminal (a number never wraps), full option names in piped --help, Dask's
logs only with -v, and one rounding path for every number raglake shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from raglake import prefect_settings
from raglake.cli import render
from raglake.cli.common import print_run_summary
from raglake.metrics.registry import all_metrics
from raglake.pipeline.lakes import open_lake
from raglake.report.format import fold_unscored, main_status, number, rounded
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

GOLDEN, REPLAY = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
JUDGE = [m.name for m in all_metrics(level="case") if m.family == "judge"][:5]
METRICS = ["recall_any_at_k", "mrr_at_k", "ndcg_at_k", "scope_miss", "abstention_accuracy", *JUDGE]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("cli_output") / "lake")
    land(path, GOLDEN, REPLAY, "r-one", metrics=METRICS)
    return path


def _printed(width: int, fn, *args) -> str:
    saved = render.console
    render.console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    try:
        fn(*args)
        return render.console.export_text()
    finally:
        render.console.file.close()
        render.console = saved


def test_summary_folds_the_metrics_without_values_into_one_line_per_group(lake):
    q = open_lake(lake)
    rows = q.breakdown(["r-one"], "all")
    empty = [r["metric"] for r in rows if not r["n"]]
    no_judge = [r for r in rows if not r["n"] and r["main_reason"] == "no_judge" and main_status(r) == "skipped"]
    scored = [r["metric"] for r in rows if r["n"]]
    assert len(no_judge) >= 3 and scored
    out = _printed(200, print_run_summary, q, "r-one")
    first_table = out[: out.index("└")]  # the run-level figures follow
    table_lines = [line for line in first_table.splitlines() if line.startswith("│")]
    shown = {line.split("│")[1].strip() for line in table_lines}
    assert shown == set(scored)  # a row for each metric with a value, none for the others
    skipped = sum(r["n_skipped"] for r in rows if r["family"] == "judge" and r["main_reason"] == "no_judge")
    assert f"{skipped} judge metric value(s) were skipped: no judge is configured" in out  # said once:
    assert f"{len(no_judge)} judge metrics with no value" not in out  # the hint stands for the fold line
    assert not any(m in shown for m in empty)
    assert sum(len(g["metrics"]) for g in fold_unscored(rows)) == len(empty)  # every one in some group


def _status_row(metric: str, family: str, n: int, undefined: int, skipped: int, failed: int, reason) -> dict:
    keys = ("metric", "family", "n", "n_undefined", "n_skipped", "n_failed", "main_reason")
    return dict(zip(keys, (metric, family, n, undefined, skipped, failed, reason)))


def test_fold_groups_by_family_status_and_reason_and_names_small_groups():
    rows = [_status_row(f"j{i}", "judge", 0, 1, 9, 0, "no_judge") for i in range(4)]
    rows += [
        _status_row("lab", "label", 0, 5, 0, 0, "no_labels"),
        _status_row("bad", "judge", 0, 0, 2, 2, "timeout"),
        _status_row("fine", "retrieval", 3, 0, 0, 0, None),
    ]
    texts = [g["text"] for g in fold_unscored(rows)]
    assert texts == [
        "4 judge metrics with no value: skipped on most cases (no judge configured)",
        "1 label metric with no value (lab): undefined on every case (no labels in the golden set)",
        "1 judge metric with no value (bad): failed on most cases (timeout)",  # a tie goes to `failed`
    ]


@pytest.mark.parametrize("width", [80, 100])
def test_breakdown_fits_the_width_and_never_wraps_a_number(lake, width):
    q = open_lake(lake)
    rows = q.breakdown(["r-one"], "category")
    metrics = [m for m in METRICS if any(r["metric"] == m and r["n"] for r in rows)]
    out = _printed(width, lambda: render.console.print(render.pivot_table(rows, metrics, "breakdown")))
    assert max(len(line) for line in out.splitlines()) <= width
    cells = {f"{number(r['mean'])} ({r['n']})" for r in rows if r["n"] and r["metric"] in metrics}
    assert cells and all(cell in out for cell in cells)  # each on one line, whole
    narrow = _printed(30, lambda: render.console.print(render.pivot_table(rows, metrics, "b")))
    assert all(cell in narrow for cell in cells if len(cell) < 10)  # the long layout: one line per slice × metric
    assert max(len(line) for line in narrow.splitlines()) <= 30


def test_piped_help_shows_full_option_names():
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    done = subprocess.run(
        [sys.executable, "-m", "raglake", "run", "--help"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "--no-require-snippets" in done.stdout and "--spot-check-base-url" in done.stdout
    assert not re.search(r"--[\w-]*…", done.stdout)  # no option name cut short


def test_dask_and_prefect_logs_follow_verbose(monkeypatch):
    for key in prefect_settings.VERBOSE_LEVELS:
        monkeypatch.delenv(key, raising=False)
        monkeypatch.setattr(prefect_settings, "_ours", set())
    prefect_settings.apply(verbose=False)
    assert os.environ[prefect_settings.DASK_LOGGING] == "warning"
    assert os.environ[prefect_settings.LOGGING_LEVEL] == "WARNING"
    prefect_settings.apply(verbose=True)
    assert os.environ[prefect_settings.DASK_LOGGING] == "info"
    prefect_settings.apply(verbose=False)
    code = (
        "from raglake import prefect_settings; prefect_settings.apply(verbose=False); import logging, distributed; "
        "print(logging.getLogger('distributed').getEffectiveLevel())"
    )
    env = {k: v for k, v in os.environ.items() if k != prefect_settings.DASK_LOGGING}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 30  # WARNING: the LocalCluster's INFO lines are not printed


def test_one_rounding_path():
    # a 4-digit rounding before the 3-digit one showed 0.66951 as 0.669 in one place and 0.670 in another
    for value in (0.66951, 0.6695, 0.12345, 0.9995, 1e-9, 2.0004999):
        assert number(rounded(value)) == number(value) == render.fmt(value)
    assert rounded(0.66951) == 0.670 and number(None) == number(float("nan")) == "–"


def test_cli_tables_read_numbers_through_the_shared_formatter(lake):
    out = _printed(200, print_run_summary, open_lake(lake), "r-one")
    for r in open_lake(lake).breakdown(["r-one"], "all"):
        if r["n"]:
            assert re.search(rf"│ {r['metric']}\s+│.*│ {re.escape(number(r['mean']))} │", out), r["metric"]


def test_progress_is_untouched_by_a_pipe(tmp_path: Path):
    """render.output_width: the terminal's width on a terminal, $COLUMNS or 120 on a pipe."""
    code = "from raglake.cli import render; print(render.output_width(), render.console.width)"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.stdout.split() == [str(render.PIPE_WIDTH)] * 2
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**env, "COLUMNS": "90"}, capture_output=True, text=True
    )
    assert done.stdout.split() == ["90", "90"]


def _raglake(*args: str, lake: str) -> str:
    from prefect.settings import get_current_settings

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_LOGGING", "DASK_DISTRIBUTED"))}
    # the session's Prefect test server: what is printed is this process's logging, whichever server it
    # reports to, and each command is spared starting a temporary one (~10-15 s here)
    env["PREFECT_API_URL"] = str(get_current_settings().api.url)
    done = subprocess.run(
        [sys.executable, "-m", "raglake", *args, "--lake", lake],
        cwd=ROOT,
        env={**env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_prefect_and_dask_logs_only_with_verbose(tmp_path: Path):
    """`rescore` and `run --runner dask` print their result, not Prefect's INFO lines nor the ~30 lines
    of Dask's `distributed` logs; `-v` brings Prefect's back."""
    lake = str(tmp_path / "lake")
    out = _raglake(
        "run", "--target", REPLAY, "--golden", GOLDEN, "-m", "recall_any_at_k", "--runner", "dask", lake=lake
    )
    assert "landed run(s)" in out
    assert "distributed." not in out and "| INFO" not in out, out
    out = _raglake("rescore", "latest", "--force", "-m", "recall_any_at_k", lake=lake)
    assert "recomputed 1 metric(s)" in out and "| INFO" not in out, out
    out = _raglake("rescore", "latest", "--force", "-m", "recall_any_at_k", "-v", lake=lake)
    assert "recomputed 1 metric(s)" in out and "| INFO" in out and "Flow run" in out
