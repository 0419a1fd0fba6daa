"""The `evaluate` flow under the session's Prefect test harness: it lands a run, a repeated run
does no scoring work, and a run that crashed while landing resumes without scoring again."""

from __future__ import annotations

import json

import pytest

from raglake.errors import InputError
from raglake.lake.query import scalar
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import RunSettings
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
TARGET = f"replay:{FIXTURES / 'mini_captures.jsonl'}"


@pytest.fixture
def scoring_calls(monkeypatch) -> list[int]:
    import raglake.tasks.score

    calls: list[int] = []
    original = raglake.tasks.score.score_columnar

    def counting(batch, *args, **kwargs):  # the number of cases in each batch scored
        calls.append(len(batch))
        return original(batch, *args, **kwargs)

    monkeypatch.setattr(raglake.tasks.score, "score_columnar", counting)
    return calls


def test_flow_lands_a_run_and_a_repeat_is_all_cache_hits(lake_dir: str, scoring_calls: list[int]) -> None:
    from raglake.flows.evaluate import evaluate

    first = evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, batch_size=3))
    assert sorted(scoring_calls) == [1, 3]  # two batches of cases were scored (in either order)
    q = open_lake(lake_dir)
    assert [r["run_id"] for r in q.runs()] == [first]
    assert scalar(q.con, "SELECT count(DISTINCT case_id) FROM scores") == 4

    second = evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, batch_size=3))
    assert second != first
    assert sorted(scoring_calls) == [1, 3]  # nothing was scored again: both batches came from the result store
    q = open_lake(lake_dir)
    same = scalar(
        q.con,
        "SELECT count(*) FROM scores a JOIN scores b USING (case_id, metric) "
        "WHERE a.run_id = $a AND b.run_id = $b AND a.status = b.status "
        "AND (a.value = b.value OR (a.status <> 'ok' AND b.status <> 'ok'))",
        a=first,
        b=second,
    )
    assert same == scalar(q.con, "SELECT count(*) FROM scores WHERE run_id = $a", a=first)


def test_changed_k_is_a_cache_miss(lake_dir: str, scoring_calls: list[int]) -> None:
    from raglake.flows.evaluate import evaluate

    evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir))
    evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, k=3))
    assert scoring_calls == [4, 4]


def test_a_crashed_landing_resumes_with_cached_scores(lake_dir: str, scoring_calls: list[int], monkeypatch) -> None:
    import raglake.flows.evaluate_body
    import raglake.pipeline.rows
    import raglake.tasks.land
    from raglake.flows.evaluate import evaluate

    quick = raglake.tasks.land.land.with_options(retry_delay_seconds=0)
    monkeypatch.setattr(raglake.flows.evaluate_body, "land", quick)
    original = raglake.pipeline.rows.land_run

    def crash(*args, **kwargs):
        raise OSError("connection to the object store dropped")

    monkeypatch.setattr(raglake.pipeline.rows, "land_run", crash)
    with pytest.raises(OSError):
        evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, run_id="r-resume"))
    assert open_lake(lake_dir).runs() == []
    monkeypatch.setattr(raglake.pipeline.rows, "land_run", original)
    assert evaluate(RunSettings(golden=GOLDEN, target=TARGET, lake=lake_dir, run_id="r-resume")) == "r-resume"
    assert scoring_calls == [4]  # scored once, before the crash
    assert [r["run_id"] for r in open_lake(lake_dir).runs()] == ["r-resume"]


def test_bad_input_fails_the_flow_before_anything_is_written(lake_dir: str, tmp_path) -> None:
    from raglake.flows.evaluate import evaluate

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "category": "factul"}\n')
    with pytest.raises(InputError, match="did you mean 'factual'"):
        evaluate(RunSettings(golden=str(bad), target=TARGET, lake=lake_dir))
    assert Lake(lake_dir).snapshot() == {t: 0 for t in Lake(lake_dir).snapshot()}


def test_the_flow_scores_anchors_under_the_rule_applied_once(lake_dir: str, tmp_path) -> None:
    """The support ("./ a.md", "A/B >") is (" a.md", ("A/B",)) and the chunk ("./ a.md", "A/B > x") is
    (" a.md", ("A/B", "x")): a match at rank 1 (METRICS.md §1, applied to what the files say). The flow used to
    read its staged batches normalising them again ("a.md", "A > B"), which no longer matched."""
    from raglake.flows.evaluate import evaluate

    golden, replay = tmp_path / "golden.jsonl", tmp_path / "captures.jsonl"
    golden.write_text(
        '{"id": "e1", "question": "q?", "gold_supports": [{"rel_path": "./ a.md", "heading_path": "A/B >"}]}\n'
    )
    chunks = [{"rank": 1, "rel_path": "./ a.md", "heading_path": "A/B > x", "text": "t"}]
    replay.write_text(json.dumps({"case_id": "e1", "answer": "y", "retrieved": chunks}) + "\n")
    run = evaluate(RunSettings(golden=str(golden), target=f"replay:{replay}", lake=lake_dir, metrics=["mrr_at_k"]))
    q = open_lake(lake_dir)
    assert scalar(q.con, "SELECT value FROM scores WHERE run_id = $r AND metric = 'mrr_at_k'", r=run) == 1.0
