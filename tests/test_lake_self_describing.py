"""A self-describing lake (issue 13, item 4): every table and column documented (docs/lake.md and the
files' own field metadata), a `metrics` table landed with every scoring, `scores.is_latest` a plain
Parquet reader can filter on (agreeing with raglake's scores_latest view, also after a re-scoring and a
crash between a scoring's landing and its settle), `runs.committed`, and older lakes still readable."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from raglake.docs import lake_markdown
from raglake.lake.latest import settle
from raglake.lake.query import fetch
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.registry import get_metric
from raglake.pipeline.lakes import open_lake
from tests.conftest import ROOT
from tests.lakekit import land

FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN, TARGET = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"


def test_docs_lake_md_is_generated_from_the_table_specs() -> None:
    text = (ROOT / "docs" / "lake.md").read_text()
    assert text == lake_markdown(), "run: python -m raglake.docs lake > docs/lake.md"
    for spec in TABLES.values():
        assert f"## `{spec.name}`" in text and spec.doc and spec.partition_doc
        undocumented = [f.name for f in spec.schema if not spec.description(f.name)]
        assert not undocumented, f"{spec.name}: columns without a description: {undocumented}"


@pytest.fixture
def lake_dir(tmp_path: Path) -> str:
    lake = str(tmp_path / "lake")
    land(lake, GOLDEN, TARGET, "r-a")
    return lake


def _rescore_by_hand(lake_dir: str, metric: str, value: float, cases: list[str] | None = None) -> str:
    """A second scoring of one metric, landed as a re-scoring lands it (is_latest true), not yet settled."""
    q = open_lake(lake_dir)
    case_ids = cases or [r[0] for r in fetch(q.con, "SELECT case_id FROM cases WHERE run_id = 'r-a'")]
    n = len(case_ids)
    cols = {
        "case_id": case_ids,
        "metric": [metric] * n,
        "value": [value] * n,
        "status": ["ok"] * n,
        "reason": [None] * n,
        "metric_version": ["9"] * n,
        "scoring_id": ["s-later"] * n,
        "scored_at": [dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)] * n,
        "is_latest": [True] * n,
    }
    unset = ("label_source", "embedder", "judge_model", "prompt_id", "prompt_version", "judge_call")
    Lake(lake_dir).write("scores", "r-a", to_arrow(TABLES["scores"], cols, optional=unset), "s-later")
    return "s-later"


def _plain_latest(lake_dir: str) -> list[tuple]:
    """What a plain pyarrow reader gets by filtering on is_latest."""
    table = ds.dataset(f"{lake_dir}/scores", format="parquet", partitioning="hive").to_table(
        filter=ds.field("is_latest"), columns=["run_id", "case_id", "metric", "scoring_id"]
    )
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names)))


def _view_latest(lake_dir: str) -> list[tuple]:
    q = open_lake(lake_dir)
    return sorted(fetch(q.con, "SELECT run_id, case_id, metric, scoring_id FROM scores_latest"))


def test_a_first_scoring_is_latest_everywhere_and_lands_what_its_metrics_mean(lake_dir: str) -> None:
    q = open_lake(lake_dir)
    assert fetch(q.con, "SELECT count(*) FILTER (WHERE NOT is_latest OR is_latest IS NULL) FROM scores") == [(0,)]
    assert _plain_latest(lake_dir) == _view_latest(lake_dir) != []
    # a plain reader: the metrics table says what each scored metric is, for the scoring that wrote it
    metrics = pq.read_table(f"{lake_dir}/metrics").to_pylist()
    scored = {r[0] for r in fetch(q.con, "SELECT DISTINCT metric FROM scores")}
    assert scored <= {m["metric"] for m in metrics}
    mrr = next(m for m in metrics if m["metric"] == "mrr_at_k")
    registered = get_metric("mrr_at_k")
    assert (mrr["direction"], mrr["version"], mrr["family"]) == ("higher", registered.version, registered.family)
    assert {m["scoring_id"] for m in metrics} == {r[0] for r in fetch(q.con, "SELECT DISTINCT scoring_id FROM scores")}
    # and the column descriptions travel in the files
    field = pq.read_schema(next(Path(lake_dir, "scores").rglob("*.parquet"))).field("is_latest")
    assert b"newest scoring" in field.metadata[b"description"]


def test_settle_flips_superseded_rows_and_agrees_with_the_view(lake_dir: str) -> None:
    _rescore_by_hand(lake_dir, "mrr_at_k", 0.25)
    # before settling (a crash right after landing): the plain filter sees two latest rows per case
    assert len(_plain_latest(lake_dir)) > len(_view_latest(lake_dir))
    rewritten = settle(Lake(lake_dir), "r-a")
    assert len(rewritten) == 1  # only the first scoring's file had stale flags
    assert _plain_latest(lake_dir) == _view_latest(lake_dir)
    assert {s for _, _, m, s in _plain_latest(lake_dir) if m == "mrr_at_k"} == {"s-later"}
    assert settle(Lake(lake_dir), "r-a") == []  # idempotent
    # nothing lost: every row of both scorings is still there, values unchanged
    q = open_lake(lake_dir)
    assert fetch(q.con, "SELECT count(*) FROM scores WHERE metric = 'mrr_at_k' AND NOT is_latest") == fetch(
        q.con, "SELECT count(*) FROM scores WHERE metric = 'mrr_at_k' AND scoring_id = 's-later'"
    )


def test_a_partial_scoring_supersedes_only_its_cases(lake_dir: str) -> None:
    _rescore_by_hand(lake_dir, "mrr_at_k", 0.5, cases=["c1"])
    settle(Lake(lake_dir), "r-a")
    latest = _plain_latest(lake_dir)
    assert latest == _view_latest(lake_dir)
    assert {(c, s) for _, c, m, s in latest if m == "mrr_at_k" and s == "s-later"} == {("c1", "s-later")}


def test_the_plain_reader_query_of_docs_lake_md_runs(lake_dir: str) -> None:
    text = (ROOT / "docs" / "lake.md").read_text()
    query = text.split("```sql\n", 1)[1].split("```", 1)[0].replace("'lake/", f"'{lake_dir}/")
    rows = duckdb.sql(query).fetchall()
    assert rows and {r[0] for r in rows} == {"r-a"} and {r[2] for r in rows} <= {"higher", "lower", "none"}


def test_a_lake_written_before_the_renames_and_new_columns_stays_readable(lake_dir: str) -> None:
    """An older layout: runs with `target` (now target_spec), no committed columns, scores without is_latest."""
    runs_file = next(Path(lake_dir, "runs").rglob("*.parquet"))
    old = (
        pq.read_table(runs_file)
        .drop_columns(["committed", "committed_at"])
        .rename_columns(
            [
                "target" if n == "target_spec" else n
                for n in TABLES["runs"].schema.names
                if n not in ("committed", "committed_at")
            ]
        )
    )
    pq.write_table(old, runs_file)
    for f in Path(lake_dir, "scores").rglob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["is_latest"]), f)
    q = open_lake(lake_dir)
    [(spec, committed)] = fetch(q.con, "SELECT target_spec, committed FROM runs")
    assert spec == TARGET and committed is None
    assert fetch(q.con, "SELECT DISTINCT is_latest FROM scores") == [(None,)]
    assert q.runs(10) and _view_latest(lake_dir)
    # a re-scoring's settle upgrades the old files: flags written, nothing else changed
    _rescore_by_hand(lake_dir, "mrr_at_k", 0.25)
    settle(Lake(lake_dir), "r-a")
    assert _plain_latest(lake_dir) == _view_latest(lake_dir)
    assert pa.types.is_boolean(
        pq.read_schema(next(Path(lake_dir, "scores").rglob("s-*.parquet"))).field("is_latest").type
    )
