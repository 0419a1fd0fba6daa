"""Staged batches (raglake.pipeline.staging): content-addressed, found again instead of redone, never
half-read; a run landed from its staged parts streams into the lake the same rows as one landed from
memory, and a table written from parts gets large row groups."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raglake.lake import store
from raglake.lake.query import connect
from raglake.lake.store import ROW_GROUP_ROWS, Lake
from raglake.lake.tables import TABLES
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import all_metrics, metric_versions
from raglake.pipeline.finish import capture_facts
from raglake.pipeline.plan import plan_run
from raglake.pipeline.rows import land_staged_run
from raglake.pipeline.settings import RunSettings
from raglake.pipeline.staging import Store, find_scored, stage_cases, stage_pairs
from raglake.tasks.score import ScoreSettings, score_cases
from tests.conftest import FIXTURES
from tests.rowpath import land_scored_run, score_batch

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
TARGET = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
METRICS = ["recall_any_at_k", "mrr_at_k", "ndcg_at_k", "abstention_accuracy", "grounding_presence_rate"]


def _plan(lake: str):
    plan = plan_run(RunSettings(golden=GOLDEN, target=TARGET, lake=lake, run_id="r-staged", metrics=METRICS))
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    return plan


def test_staged_cases_are_content_addressed_and_written_once(tmp_path: Path) -> None:
    plan = _plan(str(tmp_path / "lake"))
    results = str(tmp_path / "results")
    first = stage_cases(results, plan.golden.cases, 3)
    files = sorted(p for p in Path(results).rglob("*") if p.is_file())
    again = stage_cases(results, list(plan.golden.cases), 3)  # a list, not a spool: the same bytes
    assert first == again and sorted(p for p in Path(results).rglob("*") if p.is_file()) == files
    assert [b.n for b in first] == [3, len(plan.golden.cases) - 3]
    assert first[0].read_cases() == list(plan.golden.cases)[:3]


def test_a_scored_batch_without_its_done_marker_is_scored_again(tmp_path: Path) -> None:
    plan = _plan(str(tmp_path / "lake"))
    cases = list(plan.golden.cases)
    [batch] = stage_pairs(str(tmp_path / "results"), cases, plan.target.capture(cases), 10, "test")
    settings = ScoreSettings.of(metric_versions(plan.metrics), plan.config, frozenset(), None)
    ref = score_cases.fn(batch, settings)
    assert score_cases.fn(batch, settings) == ref  # found, not redone
    key = ref.folder.rsplit("/", 1)[1]
    Store(batch.results).fs.rm(Store(batch.results).path(f"{ref.folder}/_done"))  # as if killed before the marker
    assert find_scored(batch.results, 0, key) is None
    assert score_cases.fn(batch, settings) == ref


def test_landing_from_staged_parts_gives_the_rows_of_landing_from_memory(tmp_path: Path) -> None:
    lakes = {}
    for how in ("memory", "staged"):
        plan = _plan(str(tmp_path / how))
        cases = list(plan.golden.cases)
        captures = plan.target.capture(cases)
        run_level = all_metrics(level="run")
        values = [v for m in run_level for v in m.fn(RunInputs(captures))]
        record = plan.record(plan.started_at + dt.timedelta(seconds=5), len(captures))
        record.metric_versions.update(metric_versions(run_level))
        if how == "memory":
            scored = score_batch(zip(cases, captures), plan.metrics, plan.config)
            land_scored_run(plan.lake, record, cases, captures, scored, values, plan.scoring_id)
        else:
            batches = stage_pairs(str(tmp_path / "results"), cases, captures, 2, "test")
            settings = ScoreSettings.of(metric_versions(plan.metrics), plan.config, frozenset(), None)
            refs = [score_cases.fn(b, settings) for b in reversed(batches)]  # landing puts them in batch order
            facts = capture_facts(refs)
            assert [v for m in run_level for v in m.fn(RunInputs(facts))] == values
            land_staged_run(plan.lake, record, refs, values, plan.scoring_id)
        lakes[how] = plan.lake
    for table in ("cases", "chunks", "labels", "scores", "run_metrics", "metrics", "runs"):
        wall_clock = ", committed_at" if table == "runs" else ""  # when the runs row was written
        rows = [  # the run's recorded settings name its own lake: the one difference the two ways may have
            repr(connect(lake).sql(f"SELECT * EXCLUDE (run_id{wall_clock}) FROM {table}").fetchall()).replace(
                str(tmp_path / how), "<lake>"
            )
            for how, lake in lakes.items()
        ]
        assert rows[0] == rows[1] and rows[0] != "[]", table  # repr: NaN equals NaN


def test_a_table_written_from_parts_gets_row_groups_of_the_configured_size(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    schema = TABLES["run_metrics"].schema
    part = pa.table({n: pa.nulls(1000, schema.field(n).type) for n in schema.names}, schema=schema)
    n_parts = ROW_GROUP_ROWS // 1000 + 5
    path = lake.write("run_metrics", "r-1", (part for _ in range(n_parts)), "r-1")
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == n_parts * 1000
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [
        (ROW_GROUP_ROWS // 1000 + 1) * 1000,
        (n_parts - ROW_GROUP_ROWS // 1000 - 1) * 1000,
    ]


def test_a_wide_table_gets_row_groups_of_bounded_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide rows (the `cases` table's texts) close a row group at ROW_GROUP_BYTES of Arrow data before
    ROW_GROUP_ROWS rows: a group is held and encoded whole, so its size bounds the landing's memory; every row
    lands, in order."""
    monkeypatch.setattr(store, "ROW_GROUP_BYTES", 1_000_000)
    lake = Lake(str(tmp_path / "lake"))
    schema = TABLES["run_metrics"].schema
    rows = 500
    columns = {n: pa.nulls(rows, schema.field(n).type) for n in schema.names}
    text_column = next(n for n in schema.names if schema.field(n).type == pa.string())
    parts = []
    for i in range(20):  # 20 parts of ~250 kB: groups of 4 parts (the 4th reaches 1 MB)
        columns[text_column] = pa.array([f"{i:02d}-{j:04d}-" + "x" * 490 for j in range(rows)])
        parts.append(pa.table(columns, schema=schema))
    path = lake.write("run_metrics", "r-1", iter(parts), "r-1")
    meta = pq.ParquetFile(path).metadata
    groups = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(groups) == 20 * rows and len(groups) == 5 and set(groups) == {4 * rows}, groups
    read = pq.read_table(path).column(text_column).to_pylist()
    assert read == [v for part in parts for v in part.column(text_column).to_pylist()]


def test_cases_rows_read_from_staged_lines_equal_the_models_fields() -> None:
    """The `cases` rows are built from the staged JSON lines (no pydantic); each field must equal what
    the validated models say (the sample's two methods and the fixture)."""
    import hashlib

    from raglake.golden import load_golden
    from raglake.pipeline.settings import SAMPLE_CAPTURES, SAMPLE_GOLDEN
    from raglake.targets.replay import ReplayFile
    from tests.rowpath import cases_table

    sample = [(SAMPLE_GOLDEN, spec.removeprefix("replay:")) for spec in SAMPLE_CAPTURES]
    for golden, replay in [(GOLDEN, TARGET.removeprefix("replay:")), *sample]:
        cases = list(load_golden(golden).cases)
        captures = ReplayFile(str(replay)).capture(cases)
        rows = cases_table(cases, captures).to_pylist()
        assert len(rows) == len(cases)
        for row, case, cap in zip(rows, cases, captures):
            assert row["golden_case"] == case.model_dump_json() and GoldenCase_of(row) == case
            assert row["capture_hash"] == hashlib.sha256(cap.model_dump_json().encode()).hexdigest()[:16]
            assert row["gold_support_list"] == [
                {"rel_path": s.rel_path, "heading_path": s.heading, "snippets": list(s.snippets), "date": s.date,
                 "required": s.required}
                for s in case.gold_supports
            ]  # fmt: skip
            refs = [{"rel_path": r.rel_path, "heading_path": r.heading} for r in cap.references]
            assert row["reference_list"] == refs
            assert row["tags"] == list(case.tags) and row["n_retrieved"] == len(cap.retrieved)
            assert (row["answer"], row["abstained"], row["capture_status"]) == (cap.answer, cap.abstained, cap.status)
            assert row["latency_wall_ms"] == cap.latency_ms.wall and row["latency_total_ms"] == cap.latency_ms.total


def GoldenCase_of(row: dict):  # noqa: N802
    from raglake.schemas import GoldenCase

    return GoldenCase.model_validate_json(row["golden_case"])
