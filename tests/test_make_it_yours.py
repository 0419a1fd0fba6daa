"""Issue 26's done-when, end to end: a user's project in a temporary folder (not the repository) with one Python
metric, one YAML rubric and two assertions, plus its raglake.yaml, run by `raglake run` with no options. Their
rows land and appear in `raglake metrics`, `breakdown`, `compare`, the report and `metric_registray` (also in a
process that never read the eval file); editing the metric's code makes `raglake rescore` recompute exactly that
metric; with a stub judge the rubric's second run makes zero judge calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from raglake.cli import app
from tests.conftest import FIXTURES
from tests.fake_openai import FakeOpenAI, Reply, error, ok, prompt_id_of

pytestmark = pytest.mark.usefixtures("prefect_harness")
OWN = ["short_answer", "polite_tone", "polite_tone_pass", "cites_pn", "no_apology"]
CHECKS = """\
import raglake


@raglake.metric("short_answer", inputs=("answer",), description="the answer fits in {limit} characters")
def short_answer(case):
    return len(case.answer) <= {limit}
"""
RUBRIC = """\
criteria: Is the answer courteous and free of blame?
inputs: [answer]
scale: [1, 5]
threshold: 4
"""
EVAL_FILE = """\
golden: golden.jsonl
targets: ["replay:captures.jsonl"]
lake: lake
metrics: [recall_any_at_k, short_answer, polite_tone, polite_tone_pass, cites_pn, no_apology]
plugins: [checks.py]
rubrics:
  polite_tone: rubrics/polite.yaml
assertions:
  cites_pn: {{type: regex, pattern: "PN-[0-9]{{4}}"}}
  no_apology: {{type: not-contains, value: [sorry, apologi], case_sensitive: false}}
judge: {{base_url: "{url}", model: stub-judge, backoff_s: 0.01}}
"""


def _judge(body: dict[str, Any]) -> Reply:
    """The stub judge: the rubric's prompt scores 5 when the answer is short, else 2."""
    if prompt_id_of(body) != "rubric_polite_tone":
        return error(400, f"the stub judge knows no prompt {prompt_id_of(body)}")
    user = body["messages"][-1]["content"]
    return ok({"reasoning": "Courteous and neutral in tone.", "score": 5 if "Postgres" in user else 2})


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    folder = tmp_path / "my-rag-evals"
    (folder / "rubrics").mkdir(parents=True)
    shutil.copy(FIXTURES / "mini_golden.jsonl", folder / "golden.jsonl")
    shutil.copy(FIXTURES / "mini_captures.jsonl", folder / "captures.jsonl")
    (folder / "checks.py").write_text(CHECKS.format(limit=20))
    (folder / "rubrics" / "polite.yaml").write_text(RUBRIC)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-make-it-yours")
    with FakeOpenAI(handler=_judge) as server:
        (folder / "raglake.yaml").write_text(EVAL_FILE.format(url=server.url))
        yield folder, server


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def _scores(folder: Path) -> list[tuple]:
    return duckdb.sql(
        f"SELECT metric, status, count(*), avg(value) FILTER (WHERE status = 'ok') FROM read_parquet("
        f"'{folder}/lake/scores/**/*.parquet', hive_partitioning=false) WHERE metric IN {tuple(OWN)} "
        "GROUP BY ALL ORDER BY ALL"
    ).fetchall()


def test_a_users_own_metrics_rubric_and_assertions_live_like_built_ins(project) -> None:
    folder, server = project
    _cli("run", "--quiet")
    calls = server.count
    assert calls == 3  # the rubric's one step, once per case with an answer (c4's capture failed)
    # by hand from the fixture: answers "Atlas uses Postgres 16 [1]." (27 chars), "Auth is a blocker." (18),
    # "I could not find this in the notes." (35); none cites PN-dddd, none apologises; c4 failed capture
    assert _scores(folder) == [
        ("cites_pn", "ok", 3, 0.0),
        ("cites_pn", "undefined", 1, None),
        ("no_apology", "ok", 3, 1.0),
        ("no_apology", "undefined", 1, None),
        ("polite_tone", "ok", 3, pytest.approx((5 + 2 + 2) / 3)),
        ("polite_tone", "undefined", 1, None),
        ("polite_tone_pass", "ok", 3, pytest.approx(1 / 3)),
        ("polite_tone_pass", "undefined", 1, None),
        ("short_answer", "ok", 3, pytest.approx(1 / 3)),
        ("short_answer", "undefined", 1, None),
    ]
    _cli("run", "--quiet")
    assert server.count == calls  # the second run: every rubric call is a ledger hit, zero new calls

    listed = _cli("metrics")
    for name, origin in (("short_answer", "plugin"), ("polite_tone", "rubric"), ("cites_pn", "assertion")):
        assert any(name in line and origin in line for line in listed.splitlines()), (name, listed)
    shown = _cli("breakdown", "-m", ",".join(OWN))
    assert all(name.replace("_", " ") in shown or name in shown for name in OWN), shown
    compared = _cli("compare", "latest~1", "latest", "--by", "all")
    assert "cites_pn" in compared and "polite_tone" in compared, compared  # both runs equal: the fold line
    from raglake.pipeline.lakes import open_lake

    q = open_lake(folder / "lake")
    compared_rows = q.compare(q.run_ids(["latest~1"])[0], q.run_ids(["latest"])[0])
    rows = {r["metric"]: r for r in compared_rows if r["dimension"] == "all"}
    assert all(rows[name]["higher_is_better"] is True and rows[name]["n_pairs"] == 3 for name in OWN)
    _cli("report", "latest", "--against", "latest~1", "-o", str(folder / "report.html"))
    html = (folder / "report.html").read_text()
    assert all(name in html for name in ("short_answer", "polite_tone", "cites_pn", "no_apology"))

    # a process that never read the eval file (another folder) knows them from the lake's landed definitions
    elsewhere = subprocess.run(
        [sys.executable, "-m", "raglake", "sql", "--json", "--lake", str(folder / "lake"),
         "SELECT metric, origin, higher_is_better FROM metric_registry WHERE origin <> 'builtin' ORDER BY metric"],
        cwd=folder.parent, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert elsewhere.returncode == 0, elsewhere.stderr
    rows = [json.loads(line) for line in elsewhere.stdout.splitlines() if line.strip()]
    assert [(r["metric"], r["origin"], r["higher_is_better"]) for r in rows] == [
        ("cites_pn", "assertion", True),
        ("no_apology", "assertion", True),
        ("polite_tone", "rubric", True),
        ("polite_tone_pass", "rubric", True),
        ("short_answer", "plugin", True),
    ]


def test_editing_the_metrics_code_rescores_exactly_that_metric(project) -> None:
    folder, server = project
    _cli("run", "--quiet")
    (folder / "checks.py").write_text(textwrap.dedent(CHECKS.format(limit=30)))
    out = " ".join(_cli("rescore", "latest", "--quiet").split())
    assert "recomputed 1 metric(s)" in out, out
    (version,) = {
        v
        for (v,) in duckdb.sql(
            f"SELECT DISTINCT metric_version FROM read_parquet('{folder}/lake/scores/**/*.parquet', "
            "hive_partitioning=false) WHERE metric = 'short_answer' AND is_latest"
        ).fetchall()
    }
    assert version.startswith("1+")
    latest = duckdb.sql(
        f"SELECT avg(value) FROM read_parquet('{folder}/lake/scores/**/*.parquet', hive_partitioning=false) "
        "WHERE metric = 'short_answer' AND is_latest AND status = 'ok'"
    ).fetchall()[0][0]
    assert latest == pytest.approx(2 / 3)  # 27 and 18 characters now fit in 30; 35 does not
