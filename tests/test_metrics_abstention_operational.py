"""Abstention on unanswerable questions (METRICS.md §5) and the run-level operational figures (§6)."""

from __future__ import annotations

import math

import pytest

from raglake.metrics.context import CaseContext, Label, ScoringConfig
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import RunValue, get_metric
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_one

ABSTENTION = ("abstention_accuracy", "hallucination_rate_unanswerable")


def case(answerable: bool = False) -> GoldenCase:
    data = {"id": "u", "question": "What is my bank password?", "answerable": answerable}
    if answerable:
        data["gold_supports"] = [{"rel_path": "work/a.md"}]
    return GoldenCase.model_validate(data)


def capture(answer: str, abstained: bool | None = None, **kw) -> Capture:
    data = {"case_id": "u", "answer": answer, "abstained": abstained}
    data.update(kw)
    return Capture.model_validate(data)


def both(c: GoldenCase, cap: Capture) -> tuple:
    return tuple(score_one(c, cap, m) for m in ABSTENTION)


def assert_pair(c: GoldenCase, cap: Capture, abstained: float) -> None:
    acc, hal = both(c, cap)
    assert (acc.status, hal.status) == ("ok", "ok"), (acc, hal)
    assert acc.value == abstained
    assert hal.value == 1.0 - abstained  # hallucination = 1 − abstention_accuracy


# ---- the explicit field first ----------------------------------------------------------------


def test_explicit_abstained_true_wins_over_text():
    # the text reads like an answer, but the target says it abstained
    assert_pair(case(), capture("Your password is hunter2.", abstained=True), 1.0)


def test_explicit_abstained_false_wins_over_phrases():
    # the text holds an uncertainty phrase, but the target says it did not abstain
    assert_pair(case(), capture("I don't know the exact one, but it is hunter2.", abstained=False), 0.0)


def test_explicit_abstained_with_empty_answer():
    assert_pair(case(), capture("", abstained=True), 1.0)


# ---- phrases when the field is missing -------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        # seed 004's list, any case, anywhere in the text
        "I don't know.",
        "I do not know your password.",
        "That is unknown.",
        "I'm NOT SURE about that.",
        "I cannot determine this from the notes.",
        "There is no information about it.",
        "Insufficient data to answer.",
        "I am unable to answer that.",
    ],
)
def test_phrases_when_field_missing_abstained(answer):
    assert_pair(case(), capture(answer), 1.0)


@pytest.mark.parametrize("answer", ["Your password is hunter2.", "It is stored in the vault under 'bank'."])
def test_phrases_when_field_missing_answered(answer):
    assert_pair(case(), capture(answer), 0.0)


def test_judge_classification_between_field_and_phrases():
    metric = get_metric("abstention_accuracy")
    # no explicit field: the judge's classification beats the phrases
    ctx = CaseContext(
        case(),
        capture("I don't know, but maybe hunter2."),
        ScoringConfig(),
        judge_labels={"abstained": Label(0, "judge:m")},
    )
    [(_, s)] = score_context(ctx, [metric])
    assert (s.status, s.value) == ("ok", 0.0)
    # the explicit field beats the judge
    ctx = CaseContext(
        case(), capture("hunter2", abstained=True), ScoringConfig(), judge_labels={"abstained": Label(0, "judge:m")}
    )
    [(_, s)] = score_context(ctx, [metric])
    assert (s.status, s.value) == ("ok", 1.0)


# ---- undefined cases -------------------------------------------------------------------------


@pytest.mark.parametrize("metric", ABSTENTION)
@pytest.mark.parametrize("abstained", [True, False, None])
def test_answerable_case_is_undefined(metric, abstained):
    s = score_one(case(answerable=True), capture("I don't know.", abstained=abstained), metric)
    assert s.status == "undefined"
    assert s.reason == "answerable"
    assert math.isnan(s.value)


@pytest.mark.parametrize("metric", ABSTENTION)
@pytest.mark.parametrize("status", ["error", "timeout"])
def test_failed_capture_is_undefined(metric, status):
    s = score_one(case(), capture("", status=status, error="boom"), metric)
    assert s.status == "undefined"
    assert s.reason == "capture_failed"
    assert math.isnan(s.value)


def test_dataset_hallucination_is_one_minus_abstention():
    # 4 unanswerable cases: abstained (field), abstained (phrase), answered (field), answered (text)
    caps = [
        capture("x", abstained=True),
        capture("I do not know."),
        capture("I don't know", abstained=False),
        capture("hunter2"),
    ]
    acc = [score_one(case(), c, "abstention_accuracy").value for c in caps]
    hal = [score_one(case(), c, "hallucination_rate_unanswerable").value for c in caps]
    assert acc == [1.0, 1.0, 0.0, 0.0]
    assert sum(hal) / 4 == pytest.approx(1 - sum(acc) / 4) == pytest.approx(0.5)


# ---- run-level: error, timeout and empty-response rates ---------------------------------------


def _captures() -> list[Capture]:
    def cap(i: int, **kw) -> Capture:
        return Capture.model_validate({"case_id": f"c{i}", **kw})

    return [
        cap(1, answer="a", latency_ms={"retrieval": 10, "generation": 100, "total": 120, "wall": 130}),
        cap(2, answer="b", latency_ms={"retrieval": 20, "generation": 300, "total": 330, "wall": 340}),
        cap(3, answer="c", latency_ms={"retrieval": 40, "generation": 200, "wall": 250}),
        cap(4, answer="   ", latency_ms={"retrieval": 30, "wall": 35}),  # empty answer → status empty
        cap(5, status="error", error="HTTP 502"),
        cap(6, status="timeout", error="deadline"),
    ]


def _run(name: str, captures: list[Capture]) -> list[RunValue]:
    return get_metric(name).fn(RunInputs(captures))


def _one(name: str, captures: list[Capture]) -> RunValue:
    values = _run(name, captures)
    assert len(values) == 1
    return values[0]


def test_empty_answer_makes_status_empty():
    assert _captures()[3].status == "empty"


@pytest.mark.parametrize("name", ["error_rate", "timeout_rate", "empty_response_rate"])
def test_status_rates(name):
    # 6 cases: one error, one timeout, one empty → 1/6 each
    v = _one(name, _captures())
    assert v.metric == name
    assert v.value == pytest.approx(1 / 6)
    assert v.n == 6


def test_status_rates_all_ok():
    caps = _captures()[:3]
    for name in ("error_rate", "timeout_rate", "empty_response_rate"):
        assert _one(name, caps).value == 0.0


def test_status_rates_several():
    caps = _captures() + [Capture.model_validate({"case_id": "c7", "status": "error"})]
    # 7 cases, 2 errors → 2/7
    assert _one("error_rate", caps).value == pytest.approx(2 / 7)
    assert _one("timeout_rate", caps).value == pytest.approx(1 / 7)


# ---- run-level: latency percentiles per stage (numpy's linear interpolation) --------------------
# linear: position p = q/100 · (n − 1) in the sorted values, interpolate between floor and ceil.
#   retrieval  [10, 20, 30, 40]:  p50 at 1.5  → 25;   p95 at 2.85 → 30 + 0.85·10  = 38.5
#   generation [100, 200, 300]:   p50 at 1    → 200;  p95 at 1.9  → 200 + 0.9·100 = 290
#   total      [120, 330]:        p50 at 0.5  → 225;  p95 at 0.95 → 120 + 0.95·210 = 319.5
#   wall       [35, 130, 250, 340]: p50 at 1.5 → 190; p95 at 2.85 → 250 + 0.85·90 = 326.5

EXPECTED = {
    "latency_p50_ms": {"retrieval": (25.0, 4), "generation": (200.0, 3), "total": (225.0, 2), "wall": (190.0, 4)},
    "latency_p95_ms": {"retrieval": (38.5, 4), "generation": (290.0, 3), "total": (319.5, 2), "wall": (326.5, 4)},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_latency_percentiles_per_stage(name):
    values = {v.stage: v for v in _run(name, _captures())}
    for stage, (expected, n) in EXPECTED[name].items():
        assert stage in values, stage
        assert values[stage].metric == name
        assert values[stage].value == pytest.approx(expected)
        assert values[stage].n == n
        assert values[stage].unit == "ms"
    # no capture reports folder selection: no value is invented for it
    fs = values.get("folder_selection")
    assert fs is None or math.isnan(fs.value)


def test_latency_single_value():
    caps = [Capture.model_validate({"case_id": "x", "answer": "a", "latency_ms": {"total": 42}})]
    assert {v.stage: v.value for v in _run("latency_p50_ms", caps)}["total"] == 42.0
    assert {v.stage: v.value for v in _run("latency_p95_ms", caps)}["total"] == 42.0


def test_run_metrics_are_registered_at_run_level():
    for name in ("error_rate", "timeout_rate", "empty_response_rate", "latency_p50_ms", "latency_p95_ms"):
        m = get_metric(name)
        assert m.level == "run"
        assert m.family == "operational"
        assert m.higher_is_better is False
