"""A second run of the builtin target reuses the first run's staged captures (same corpus, settings and
questions): its latency figures are the first run's, and the run says so: a `captures_reused` figure
in run_metrics, `reused` on the target's latency rows of sql/run_figures.sql, and `(reused)` beside
them in `raglake run`'s summary and in the HTML report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from raglake.pipeline.lakes import open_lake
from raglake.report import gather, render
from tests.conftest import ROOT
from tests.httpkit import small_corpus

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]


def _run(args: list[str]) -> tuple[str, str]:
    from typer.testing import CliRunner

    from raglake.cli import app

    result = CliRunner().invoke(app, ["run", *args, "--quiet"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    (run_id,) = re.search(r"landed run\(s\): (\S+)", result.output).groups()
    return run_id, result.output


def _latency_rows(output: str) -> list[str]:
    return [line for line in output.splitlines() if "latency_p" in line]


def test_a_second_builtin_run_marks_its_latency_as_reused(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join((ROOT / "data" / "golden" / "sample.jsonl").read_text().splitlines(True)[:3]))
    lake = str(tmp_path / "lake")
    args = ["--golden", str(golden), "--target", f"builtin:{corpus}", "-m", "recall_any_at_k", "--lake", lake]
    first, out_first = _run(args)
    second, out_second = _run(args)

    q = open_lake(lake)
    figures = {
        run: {(f["metric"], f["stage"]): f["value"] for f in q.figures([run])} for run in (first, second)
    }
    assert ("captures_reused", None) not in figures[first]  # the first run captured everything itself
    assert figures[second][("captures_reused", None)] == 1.0
    latency = [key for key in figures[first] if key[0].startswith("latency_p")]
    assert latency and all(figures[second][key] == figures[first][key] for key in latency)  # copied, as said

    assert _latency_rows(out_first) and not any("(reused)" in line for line in _latency_rows(out_first))
    assert _latency_rows(out_second) and all("(reused)" in line for line in _latency_rows(out_second))
    assert "captures_reused" in out_second

    rows = {run: q.figures([run]) for run in (first, second)}
    target_latency = [f for f in rows[second] if f["metric"].startswith("latency_p")]
    assert target_latency and all(f["reused"] for f in target_latency)  # no judge: every latency row is the target's
    assert not any(f["reused"] for f in rows[first])
    assert not any(f["reused"] for f in rows[second] if not f["metric"].startswith("latency_p"))

    html_first, html_second = render(gather(q, first)), render(gather(q, second))
    assert 'id="figures-reused"' not in html_first and "(reused)" not in html_first
    assert 'id="figures-reused"' in html_second
    assert html_second.count('<span class="muted">(reused)</span>') == len(target_latency)
