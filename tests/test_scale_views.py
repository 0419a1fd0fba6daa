"""Derived presentation scales (METRICS.md conventions, issue 14): the seeds' 1-5, 0-100 and letter-grade
views are SQL views over the stored values (never a second computation), each picking its metrics from
the registry's `scale_view`, and the docs table names them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics.judge import grade
from raglake.metrics.registry import all_metrics
from raglake.pipeline.lakes import open_lake
from tests.conftest import ROOT
from tests.judgekit import ScriptedGateway, canned, land_judged

N = 10
WP = ["wp_correctness", "wp_relevance", "wp_faithfulness", "wp_precision", "wp_recall", "wp_composite"]
METRICS = [*WP, "factual_accuracy", "semantic_similarity"]
GEVAL = [95, 70, 50, 30, 5]  # one factual_accuracy per grade A..E


def _number(values: dict[str, Any]) -> int:
    text = " ".join(str(v) for v in values.values())
    return int(re.search(r"case (\d+)", text).group(1))


def varied(prompt_id: str, values: dict[str, Any]) -> dict[str, Any]:
    """Canned judge replies whose scores differ from case to case."""
    i = _number(values)
    if prompt_id in ("wp_correctness", "wp_relevance"):
        return {"score": 1 + i % 5, "reasoning": f"case {i}"}
    if prompt_id == "wp_fact_check":
        facts = [{"fact": f"fact {j}", "supported_by": [1] if j < i % 4 else []} for j in range(3)]
        return {"answer_facts": facts, "answer_is_indistinct": False, "reference_facts": [], "chunks_used": [1]}
    if prompt_id == "factual_accuracy":
        s = GEVAL[i % 5]
        return {part: {"score": s, "reasoning": "r"} for part in ("correctness", "completeness", "consistency")}
    return canned(prompt_id, values)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("scales")
    golden, captures = root / "golden.jsonl", root / "captures.jsonl"
    answers = ["Atlas uses Postgres 16.", "The launch moved to May 12.", "I like turtles.", "Paris.", "Dana owns it."]
    golden.write_text(
        "".join(
            json.dumps({"id": f"c{i}", "question": f"What about case {i}?", "reference_answer": answers[0]}) + "\n"
            for i in range(N)
        )
    )
    captures.write_text(
        "".join(
            json.dumps(
                {
                    "case_id": f"c{i}",
                    "answer": f"{answers[i % 5]} (case {i})",
                    "retrieved": [{"rank": 1, "rel_path": "a.md", "text": f"Notes for case {i}."}],
                }
            )
            + "\n"
            for i in range(N)
        )
    )
    lake_dir = str(root / "lake")
    land_judged(lake_dir, str(golden), f"replay:{captures}", "r-scales", METRICS, ScriptedGateway(varied))
    return lake_dir


def _rows(lake: str, sql: str) -> list[dict[str, Any]]:
    return open_lake(lake).con.sql(sql).to_arrow_table().to_pylist()


def _stored(lake: str) -> dict[tuple[str, str], float]:
    rows = _rows(lake, "SELECT case_id, metric, value FROM scores_latest WHERE status = 'ok'")
    return {(r["case_id"], r["metric"]): r["value"] for r in rows}


def test_the_white_paper_1_5_view(lake):
    stored, scale = _stored(lake), {m.name: m.scale for m in all_metrics()}
    rows = _rows(lake, "SELECT * FROM wp_scores_1_5")
    assert {r["metric"] for r in rows} == set(WP)
    assert len(rows) == sum(1 for (_, m) in stored if m in WP)
    for r in rows:
        value = stored[r["case_id"], r["metric"]]
        want = 1 + 4 * value if scale[r["metric"]] == "0-1" else value  # METRICS.md: 1-5 view = 1 + 4x
        assert r["value_1_5"] == pytest.approx(want, abs=1e-12), r
        assert 1 <= r["value_1_5"] <= 5
    shares = {r["value"] for r in rows if r["metric"] == "wp_faithfulness"}
    assert len(shares) > 2  # the scripted judge varied them (0, 1/3, 2/3, 1)


def test_the_semantic_similarity_0_100_view(lake):
    stored = _stored(lake)
    rows = _rows(lake, "SELECT * FROM semantic_similarity_0_100")
    assert {r["metric"] for r in rows} == {"semantic_similarity"} and len(rows) == N
    for r in rows:
        exact = 100 * stored[r["case_id"], "semantic_similarity"]
        assert abs(r["value_0_100"] - exact) <= 0.005 + 1e-9, r  # rounded to 2 places
        assert r["value_0_100"] * 100 == pytest.approx(round(r["value_0_100"] * 100), abs=1e-6)
    assert len({r["value_0_100"] for r in rows}) > 1


def test_the_factual_accuracy_grades_view_as_before(lake):
    stored = _stored(lake)
    rows = _rows(lake, "SELECT * FROM factual_accuracy_grades")
    assert len(rows) == N and {r["metric"] for r in rows} == {"factual_accuracy"}
    for r in rows:
        assert r["value"] == stored[r["case_id"], "factual_accuracy"]
        assert r["grade"] == grade(r["value"]), r  # the same cut-offs as the report's Python
    assert {r["grade"] for r in rows} == set("ABCDE")


def test_every_declared_view_exists_and_reads_only_its_metrics(lake):
    con = open_lake(lake).con
    views = {r[0] for r in fetch(con, "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    declared = {m.scale_view for m in all_metrics() if m.scale_view}
    assert declared == {"wp_scores_1_5", "semantic_similarity_0_100", "factual_accuracy_grades"}
    assert declared <= views
    for view in declared:
        shown = {r[0] for r in fetch(con, f"SELECT DISTINCT metric FROM {view}")}
        assert shown <= {m.name for m in all_metrics() if m.scale_view == view}, view


def test_without_the_registry_the_lake_opens_without_the_views_over_it(lake):
    con = connect(Lake(lake))  # as the replay target opens a lake: no `metrics` view
    views = {r[0] for r in fetch(con, "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    assert "scores_latest" in views and "wp_scores_1_5" not in views
    assert fetch(con, "SELECT count(*) FROM scores")[0][0] > 0


def test_the_docs_table_names_each_metrics_scale_view():
    text = (ROOT / "docs" / "metric-table.md").read_text()
    assert "| scale view |" in text
    for m in all_metrics():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{m.name}` |"))
        assert (f"`{m.scale_view}`" in row) == bool(m.scale_view), row
