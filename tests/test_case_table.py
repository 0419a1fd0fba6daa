"""The `cases` rows a scored batch stages, built from its columns (raglake.pipeline.case_table), equal the
rows `cases_table_from_lines` makes from the staged canonical lines (the definition), column for column."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raglake.columnar.batch import ColumnarBatch
from raglake.columnar.lines import read_lines
from raglake.golden import load_golden
from raglake.pipeline.case_table import cases_table_from_columns
from raglake.pipeline.rows import cases_table_from_lines
from raglake.pipeline.settings import SAMPLE_CAPTURES, SAMPLE_GOLDEN
from raglake.pipeline.staging import jsonl
from raglake.schemas import Capture, GoldenCase
from raglake.targets.replay import ReplayFile
from tests.test_columnar_scoring import _models, _same, batches

METADATA = st.sampled_from(
    [
        {},
        {"source": "wiki", "n": 3},
        {"metadata": {}},  # the key inside itself: the empty-object shortcut must not take it
        {"big": 2**70, "f": 0.1, "s": "Café — “quoted” \\ {}", "l": [1, None, {"x": []}]},
    ]
)
EXTRA = st.fixed_dictionaries(
    {
        "metadata": METADATA,
        "tags": st.lists(st.sampled_from(["a", "b", "ünï"]), unique=True, max_size=3),
        "vault": st.sampled_from([None, "work"]),
        "category": st.sampled_from([None, "single_fact", "Multi-Hop"]),
        "difficulty": st.sampled_from([None, "easy", "Hard"]),
        "reference_answer": st.sampled_from([None, "", "It is 42."]),
    }
)
CAPTURE_EXTRA = st.fixed_dictionaries(
    {
        "latency_ms": st.sampled_from([{}, {"retrieval": 1.5, "total": 20}, {"wall": 0.0, "generation": None}]),
        "attempts": st.sampled_from([None, 1, 3]),
        "error": st.sampled_from([None, "boom"]),
        "cost_usd": st.sampled_from([None, 0, 0.0042, 3]),
    }
)


def _both(cases: list[GoldenCase], captures: list[Capture], folder: Path) -> tuple[pa.Table, pa.Table]:
    """(from columns, from lines) for a batch staged as canonical lines."""
    case_bytes, capture_bytes = jsonl(cases), jsonl(captures)
    (folder / "cases.jsonl").write_bytes(case_bytes)
    (folder / "captures.jsonl").write_bytes(capture_bytes)
    batch = ColumnarBatch.from_files(folder / "cases.jsonl", folder / "captures.jsonl", canonical=True)
    ours = cases_table_from_columns(batch, *batch.file_lines(folder / "cases.jsonl", folder / "captures.jsonl"))
    return ours, cases_table_from_lines(case_bytes, capture_bytes)


def assert_same(ours: pa.Table, theirs: pa.Table) -> None:
    assert ours.schema == theirs.schema
    for name in theirs.column_names:
        a, b = ours.column(name).to_pylist(), theirs.column(name).to_pylist()
        assert a == b, (name, next((x, y) for x, y in zip(a, b) if x != y))


@pytest.mark.parametrize("replay", SAMPLE_CAPTURES)
def test_the_sample_batch_gives_the_same_rows(replay: str, tmp_path: Path) -> None:
    golden = load_golden(SAMPLE_GOLDEN)
    captures = ReplayFile(replay.removeprefix("replay:")).capture(list(golden.cases))
    ours, theirs = _both(list(golden.cases), captures, tmp_path)
    assert theirs.num_rows == len(golden.cases) > 10
    assert_same(ours, theirs)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.data())
def test_generated_batches_give_the_same_rows(data, draw) -> None:
    cases, captures = data
    for case in cases:
        case.update({k: v for k, v in draw.draw(EXTRA).items() if v is not None})
    for capture in captures:
        capture.update({k: v for k, v in draw.draw(CAPTURE_EXTRA).items() if v is not None})
    pairs = _models(cases, captures)
    with tempfile.TemporaryDirectory() as folder:
        ours, theirs = _both([c for c, _ in pairs], [x for _, x in pairs], Path(folder))
    assert_same(ours, theirs)


def test_metadata_is_written_as_json_dumps_writes_it(tmp_path: Path) -> None:
    cases = [
        GoldenCase(id="a", question="q?", metadata={"big": 2**70, "f": 1e-7, "nested": {"metadata": {}}}),
        GoldenCase(id="b", question="q?"),
    ]
    captures = [Capture(case_id="a"), Capture(case_id="b")]
    ours, theirs = _both(cases, captures, tmp_path)
    assert ours.column("metadata").to_pylist() == [
        '{"big": 1180591620717411303424, "f": 1e-07, "nested": {"metadata": {}}}',
        "{}",
    ]
    assert_same(ours, theirs)


def test_a_golden_file_read_record_by_record_gives_its_own_lines(tmp_path: Path) -> None:
    """Metadata of mixed types defeats the bulk reader: the columns come from the models, whose dumps (without
    metadata) are not the file's lines. `golden_case` and `metadata` still come from the file's lines."""
    cases = [
        GoldenCase(id="a", question="q?", metadata={"x": 1}),
        GoldenCase(id="b", question="q?", metadata={"x": "s"}),
    ]
    captures = [Capture(case_id="a"), Capture(case_id="b")]
    (tmp_path / "cases.jsonl").write_bytes(jsonl(cases))
    (tmp_path / "captures.jsonl").write_bytes(jsonl(captures))
    batch = ColumnarBatch.from_files(tmp_path / "cases.jsonl", tmp_path / "captures.jsonl", canonical=True)
    assert batch.golden.models is not None and batch.captures.models is None
    ours, theirs = _both(cases, captures, tmp_path)
    assert ours.column("metadata").to_pylist() == ['{"x": 1}', '{"x": "s"}']
    assert ours.column("golden_case").to_pylist() == [c.model_dump_json() for c in cases]
    assert_same(ours, theirs)


def test_lines_and_columns_of_different_lengths_are_refused(tmp_path: Path) -> None:
    cases, captures = [GoldenCase(id="a", question="q?")], [Capture(case_id="a")]
    (tmp_path / "c.jsonl").write_bytes(jsonl(cases))
    (tmp_path / "x.jsonl").write_bytes(jsonl(captures))
    (tmp_path / "c2.jsonl").write_bytes(jsonl(cases * 2))
    batch = ColumnarBatch.from_files(tmp_path / "c.jsonl", tmp_path / "x.jsonl")
    with pytest.raises(ValueError, match="1 cases in columns but 2 case"):
        cases_table_from_columns(batch, read_lines(tmp_path / "c2.jsonl"), read_lines(tmp_path / "x.jsonl"))


# ---- staged files are canonical: read as they are, never normalised a second time

# rel_path and heading normalisation is not idempotent on these values: "./ a.md" is " a.md" once and "a.md"
# twice; "A/B >" is one segment ("A/B",) once, and its canonical list ["A/B"] re-read splits at "/" into two
TWICE_NORMALISED = [
    (
        {"id": "q1", "question": "x?", "gold_supports": [{"rel_path": "./ a.md", "heading_path": "A/B >"}]},
        {"case_id": "q1", "answer": "y", "references": [{"rel_path": "./ a.md", "heading_path": ["A#B", ""]}],
         "retrieved": [{"rank": 1, "rel_path": "a.md", "heading_path": "A > B", "text": "t"},
                       {"rank": 2, "rel_path": "./ a.md", "heading_path": "A/B > x", "text": "t"}]},
    ),
    (
        {"id": "q2", "question": "x?", "gold_supports": [{"rel_path": "n.md", "heading_path": ["C# tips", " "]}]},
        {"case_id": "q2", "answer": "y", "retrieved": [{"rank": 1, "rel_path": "n.md", "heading_path": "C > tips",
                                                        "text": "t"}]},
    ),
]  # fmt: skip


def test_the_score_task_reads_staged_batches_as_they_are(tmp_path: Path) -> None:
    """The score task's rows (scores, chunks, cases) equal the models' (score_batch, cases_table), also where
    normalising a canonical value again would change it (and with it which chunk matches which support)."""
    from raglake.metrics.context import ScoringConfig
    from raglake.metrics.registry import all_metrics, metric_versions
    from raglake.pipeline.staging import stage_pairs
    from raglake.tasks.score import ScoreSettings, score_cases
    from tests.rowpath import cases_table, score_batch

    pairs = [(GoldenCase.model_validate(c), Capture.model_validate(x)) for c, x in TWICE_NORMALISED]
    assert pairs[0][0].gold_supports[0].rel_path == " a.md" and pairs[1][0].gold_supports[0].heading == "C# tips"
    metrics = [m for m in all_metrics("case") if m.family in ("retrieval", "label", "abstention", "operational")]
    config = ScoringConfig(k=5)
    cases, captures = [c for c, _ in pairs], [x for _, x in pairs]
    [batch] = stage_pairs(str(tmp_path / "results"), cases, captures, 10, "test")
    ref = score_cases.fn(batch, ScoreSettings.of(metric_versions(metrics), config, frozenset(), None))
    expected = score_batch(pairs, metrics, config).tables()
    mrr = expected["scores"].filter(pa.compute.equal(expected["scores"]["metric"], "mrr_at_k"))
    # q1: rank 1 ("a.md", A > B) misses the support (" a.md", A/B), rank 2 (" a.md", A/B > x) matches it;
    # q2: the support is the one segment "C# tips", which the chunk's C > tips is not
    assert mrr["value"].to_pylist() == [0.5, 0.0]
    for name in ("scores", "chunks"):
        ours, theirs = ref.table(name).to_pylist(), expected[name].to_pylist()
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a), (name, a, b)
    assert_same(ref.table("cases"), cases_table(cases, captures))
