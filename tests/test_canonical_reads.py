"""A model's own dump read back is the same model. raglake re-reads its dumps everywhere (the spool, staged
batches, the score task's columns, the lake's golden_case and chunks for replay-run and rescore, the capture
journal); METRICS.md's anchor rule applies once, to what the user wrote, and is not idempotent: "./ a.md" is
" a.md" once and "a.md" twice, "A/B >" is the one segment "A/B", whose list ["A/B"] would split at "/"."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from raglake.columnar.batch import ColumnarBatch
from raglake.metrics.registry import all_metrics
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from raglake.pipeline.staging import jsonl, stage_pairs
from raglake.schemas import CANONICAL, Capture, GoldenCase
from raglake.spool import Spool
from raglake.targets.journal import CaptureJournal
from raglake.targets.replay import ReplayRun
from tests.rowpath import land_scored_run, score_batch

PATHS = ["a.md", "./ a.md", " ./x/b.md", "notes\\c.md", "./ ./d.md"]
HEADINGS = ["", "A > B", "A/B >", "C# tips > ", "A/B", "x#y", ["C# tips", " "], ["A/B"], ["A", "B/C"], [" > A/B "]]
anchor = st.fixed_dictionaries({"rel_path": st.sampled_from(PATHS), "heading_path": st.sampled_from(HEADINGS)})


def _case(i: int, supports: list[dict]) -> GoldenCase:
    return GoldenCase.model_validate({"id": f"c{i}", "question": "q?", "gold_supports": supports})


def _capture(i: int, chunks: list[dict], references: list[dict]) -> Capture:
    retrieved = [{**a, "rank": r + 1, "text": "t"} for r, a in enumerate(chunks)]
    return Capture.model_validate({"case_id": f"c{i}", "answer": "y", "retrieved": retrieved, "references": references})


pairs_of = st.lists(
    st.tuples(st.lists(anchor, max_size=3), st.lists(anchor, max_size=4), st.lists(anchor, max_size=2)),
    min_size=1,
    max_size=4,
).map(lambda drawn: [(_case(i, s), _capture(i, c, r)) for i, (s, c, r) in enumerate(drawn)])

EDGE = [
    (
        _case(0, [{"rel_path": "./ a.md", "heading_path": "A/B >"}]),
        _capture(0, [{"rel_path": "./ a.md", "heading_path": ["C# tips", " "]}], []),
    )
]


def test_normalising_twice_is_not_normalising_once() -> None:
    """Why CANONICAL exists: without it, the edge case's dump reads back as another case."""
    case, capture = EDGE[0]
    assert case.gold_supports[0].rel_path == " a.md" and case.gold_supports[0].heading_path == ("A/B",)
    assert GoldenCase.model_validate_json(case.model_dump_json()) != case
    assert Capture.model_validate_json(capture.model_dump_json()) != capture
    assert GoldenCase.model_validate_json(case.model_dump_json(), context=CANONICAL) == case
    assert Capture.model_validate_json(capture.model_dump_json(), context=CANONICAL) == capture


@settings(max_examples=100, deadline=None)
@given(pairs_of)
def test_dumps_read_back_with_canonical_are_the_same_models(pairs) -> None:
    for case, capture in pairs:
        assert GoldenCase.model_validate_json(case.model_dump_json(), context=CANONICAL) == case
        assert Capture.model_validate(capture.model_dump(mode="json"), context=CANONICAL) == capture


def test_a_spool_gives_back_the_models_it_was_given() -> None:
    spool: Spool[GoldenCase] = Spool(GoldenCase, "id")
    for case, _ in EDGE:
        spool.append(case)
    assert spool[0] == EDGE[0][0] and spool[0:1] == [EDGE[0][0]] and spool.get("c0") == EDGE[0][0]


@settings(max_examples=40, deadline=None)
@given(pairs_of)
def test_staged_batches_and_their_columns_read_back_as_the_models_staged(pairs) -> None:
    import tempfile

    cases, captures = [c for c, _ in pairs], [x for _, x in pairs]
    with tempfile.TemporaryDirectory() as folder:
        [batch] = stage_pairs(folder, cases, captures, 10, "test")
        assert batch.read_cases() == cases and batch.read_captures() == captures
        (Path(folder) / "c.jsonl").write_bytes(jsonl(cases))
        (Path(folder) / "x.jsonl").write_bytes(jsonl(captures))
        columns = ColumnarBatch.from_files(Path(folder) / "c.jsonl", Path(folder) / "x.jsonl", canonical=True)
        assert columns.pairs() == pairs


def test_the_capture_journal_gives_back_the_captures_it_was_given(tmp_path: Path) -> None:
    journal = CaptureJournal(tmp_path / "journal.jsonl")
    case, capture = EDGE[0]
    journal.append(case, capture)
    assert journal.load()["c0"][1] == capture


def test_replay_run_gives_back_the_captures_a_run_landed(tmp_path: Path) -> None:
    golden, replay = tmp_path / "golden.jsonl", tmp_path / "captures.jsonl"
    golden.write_text(
        '{"id": "c0", "question": "q?", "gold_supports": [{"rel_path": "./ a.md", "heading_path": "A/B >"}]}\n'
    )
    replay.write_text(
        '{"case_id": "c0", "answer": "y", "references": [{"rel_path": "./ a.md", "heading_path": "x#y >"}], '
        '"retrieved": [{"rank": 1, "rel_path": "./ a.md", "heading_path": ["C# tips", " "], "text": "t"}]}\n'
    )
    lake = str(tmp_path / "lake")
    plan = plan_run(RunSettings(golden=str(golden), target=f"replay:{replay}", lake=lake, run_id="r-edge",
                                metrics=["recall_any_at_k", "mrr_at_k"]))  # fmt: skip
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    cases = list(plan.golden.cases)
    captures = plan.target.capture(cases)
    assert captures[0].retrieved[0].heading_path == ("C# tips",) and captures[0].references[0].heading_path == ("x#y",)
    record = plan.record(dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.timezone.utc), len(cases))
    scored = score_batch(zip(cases, captures), [m for m in all_metrics("case") if m.name == "mrr_at_k"], plan.config)
    land_scored_run(plan.lake, record, cases, captures, scored, [], plan.scoring_id)
    assert ReplayRun("r-edge", plan.lake).capture(cases) == captures
