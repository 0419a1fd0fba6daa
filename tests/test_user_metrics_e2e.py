"""A user's Python metric end to end: an eval file naming a plugin, evaluated through the Python API
(`raglake.evaluate(config=...)`, the flow under the session's Prefect harness); the plugin's rows land with
its origin in the lake's `metrics` table, a case on which it raises is that case's `metric_error`, and
`raglake rescore` run from the same eval file recomputes exactly the metric whose code changed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import raglake
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics import plugins
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

CHECKS = textwrap.dedent(
    """
    import raglake


    @raglake.metric("short_answer", inputs=("answer",))
    def short_answer(case):
        return len(case.answer) <= {limit}


    @raglake.metric("picky")
    def picky(case):
        if case.id == "c2":
            raise ValueError("cannot read c2")
        return 1.0
    """
).lstrip()


@pytest.fixture(autouse=True)
def fresh_plugins(monkeypatch):
    monkeypatch.setattr(plugins, "_FILES", {})


def project(folder: Path, limit: int = 400) -> Path:
    (folder / "checks.py").write_text(CHECKS.format(limit=limit), encoding="utf-8")
    (folder / "raglake.yaml").write_text(
        textwrap.dedent(
            f"""
            golden: {FIXTURES / "mini_golden.jsonl"}
            targets: ["replay:{FIXTURES / "mini_captures.jsonl"}"]
            lake: lake
            metrics: [recall_any_at_k, short_answer, picky]
            plugins: [checks.py]
            """
        ).lstrip()
    )
    return folder / "raglake.yaml"


def test_an_eval_files_plugin_metrics_land_and_a_raise_is_that_cases_metric_error(tmp_path):
    result = raglake.evaluate(config=str(project(tmp_path)))
    con = connect(Lake(str(tmp_path / "lake")))
    rows = dict(
        ((c, m), (s, r))
        for c, m, s, r in fetch(
            con, "SELECT case_id, metric, status, reason FROM scores WHERE run_id = $r", r=result.run_id
        )
    )
    assert rows[("c2", "picky")] == ("metric_error", "ValueError: cannot read c2 (at checks.py:12)")
    assert rows[("c1", "picky")] == ("ok", None) and rows[("c1", "short_answer")] == ("ok", None)
    landed = fetch(
        con, "SELECT metric, origin, source FROM metrics WHERE metric IN ('short_answer', 'picky') ORDER BY 1"
    )
    assert landed == [("picky", "plugin", "checks.py:9"), ("short_answer", "plugin", "checks.py:4")]


def test_rescore_from_the_eval_file_recomputes_exactly_the_edited_metric(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from raglake.cli import app

    config = project(tmp_path)
    run_id = raglake.evaluate(config=str(config)).run_id
    project(tmp_path, limit=10)  # the user edits short_answer; picky and the built-in are unchanged
    monkeypatch.chdir(tmp_path)
    names = "short_answer,picky,recall_any_at_k"
    result = CliRunner().invoke(app, ["rescore", run_id, "-c", "raglake.yaml", "-m", names], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert "recomputed 1 metric(s)" in " ".join(result.output.split()), result.output
    con = connect(Lake(str(tmp_path / "lake")))
    latest = fetch(
        con,
        "SELECT metric, count(DISTINCT scoring_id), list(value ORDER BY case_id) FILTER (WHERE status = 'ok') "
        "FROM scores_latest WHERE run_id = $r GROUP BY ALL ORDER BY 1",
        r=run_id,
    )
    scorings = {m: n for m, n, _ in latest}
    assert [v for m, _, v in latest if m == "short_answer"] == [[0.0, 0.0, 0.0]]
    first = fetch(con, "SELECT DISTINCT scoring_id FROM scores WHERE run_id = $r AND metric = 'picky'", r=run_id)
    newest = fetch(
        con, "SELECT DISTINCT scoring_id FROM scores_latest WHERE run_id = $r AND metric = 'short_answer'", r=run_id
    )
    assert len(first) == 1 and newest != first and scorings == {"picky": 1, "recall_any_at_k": 1, "short_answer": 1}


def test_plugin_metrics_score_on_dask_workers_in_other_processes(tmp_path):
    result = raglake.evaluate(config=str(project(tmp_path)), runner="dask")
    con = connect(Lake(str(tmp_path / "lake")))
    query = "SELECT case_id, status FROM scores WHERE run_id = $r AND metric = 'picky' ORDER BY 1"
    rows = fetch(con, query, r=result.run_id)
    assert rows == [("c1", "ok"), ("c2", "metric_error"), ("c3", "ok"), ("c4", "undefined")]
