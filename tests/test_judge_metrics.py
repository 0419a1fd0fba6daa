"""The arithmetic of every LLM-judged score (METRICS.md §5) from parsed judge outputs: a scripted
judge (tests/judgekit.ScriptedGateway) answers through the real judge steps, or StepOutcome objects
are built by hand. Abstention, judge labels, failures and no-judge: test_judge_labels.py."""

from __future__ import annotations

from typing import Any

import pytest

from raglake.metrics.context import ScoringConfig
from raglake.metrics.judge import average_precision, grade
from tests.judgecases import (
    ANSWER,
    CHUNKS,
    FOUR,
    GENERATED,
    MODEL,
    QUESTION,
    RAGAS_PARTS,
    SEED_002,
    K,
    asked,
    assert_nan,
    assert_ok,
    attributions,
    capture,
    case,
    fact_check,
    failure,
    judged,
    relevance,
    script,
    stub_encoder,
    verdicts,
)
from tests.judgekit import ScriptedGateway

# ---- 0-5 and 1-5 single-prompt scores ------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "prompt", "output", "expected"),
    [
        (
            "groundedness",
            "groundedness",
            {"score": 2, "supported_claims": ["a"], "unsupported_claims": ["b", "c"], "reasoning": "r"},
            2,
        ),
        (
            "groundedness",
            "groundedness",
            {"score": 0, "supported_claims": [], "unsupported_claims": ["b"], "reasoning": "r"},
            0,
        ),
        ("correctness", "correctness", {"score": 5, "reasoning": "r"}, 5),
        ("correctness", "correctness", {"score": 0, "reasoning": "r"}, 0),
        ("wp_correctness", "wp_correctness", {"score": 1, "reasoning": "r"}, 1),
        ("wp_correctness", "wp_correctness", {"score": 5, "reasoning": "r"}, 5),
        ("wp_relevance", "wp_relevance", {"score": 2, "reasoning": "r"}, 2),
    ],
)
def test_single_prompt_scores_are_the_judges_score(metric, prompt, output, expected):
    gw = ScriptedGateway(script(**{prompt: output}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), [metric], gw)[metric]
    assert_ok(s, expected)
    assert (s.judge_model, s.prompt_id, s.prompt_version) == (MODEL, prompt, "1")
    assert asked(gw) == [prompt]


def test_the_prompts_see_the_case_texts():
    gw = ScriptedGateway(model=MODEL)
    judged(case(), capture(*CHUNKS), ["groundedness"], gw)
    [(pid, values)] = gw.calls
    assert values["answer"] == ANSWER
    assert values["contexts"] == "\n\n".join(f"[{i}] {t}" for i, t in enumerate(CHUNKS, start=1))


def test_only_top_k_chunks_reach_the_judge():
    gw = ScriptedGateway(model=MODEL)
    judged(case(), capture(*CHUNKS, "a fourth chunk", "a fifth"), ["groundedness"], gw)
    assert "[4]" not in gw.calls[0][1]["contexts"] and "[3] Billing" in gw.calls[0][1]["contexts"]


# ---- the white-paper fact check: wp_faithfulness, wp_precision, wp_recall ----------------------


WP = ["wp_faithfulness", "wp_precision", "wp_recall"]


def test_wp_fact_check_shares():
    # 4 answer facts, 3 supported; the answer uses chunks 1 and 3 of 3 (7 is no chunk, 1 counted once)
    out = fact_check([[1], [1, 3], [], [3]], [1, 3, 1, 7], reference_facts=[[1], []])
    s = judged(case(), capture(*CHUNKS), WP, ScriptedGateway(script(wp_fact_check=out), model=MODEL))
    assert_ok(s["wp_faithfulness"], 3 / 4)
    assert_ok(s["wp_precision"], 2 / 3)
    assert_ok(s["wp_recall"], 3 / 4)  # a distinct answer: its own facts
    assert {x.prompt_id for x in s.values()} == {"wp_fact_check"}


def test_wp_recall_of_an_indistinct_answer_uses_the_reference_facts():
    out = fact_check([[1]], [1], indistinct=True, reference_facts=[[1], [], [2], []])
    s = judged(case(), capture(*CHUNKS), WP, ScriptedGateway(script(wp_fact_check=out), model=MODEL))
    assert_ok(s["wp_recall"], 2 / 4)
    assert_ok(s["wp_faithfulness"], 1.0)


def test_wp_without_chunks():
    gw = ScriptedGateway(model=MODEL)
    s = judged(case(), capture(), WP, gw)
    assert_ok(s["wp_faithfulness"], 1.0)
    assert s["wp_faithfulness"].reason == "no_context"
    assert_nan(s["wp_precision"], "undefined")
    assert_ok(s["wp_recall"], 1.0)
    assert "wp_fact_check" not in asked(gw)  # nothing to check against: no call


# ---- wp_composite and the seed-002 case study ----------------------------------------------------


COMPOSITE = ["wp_correctness", "wp_faithfulness", "wp_precision", "wp_recall", "wp_relevance", "wp_composite"]


def test_seed_002_case_study():
    s = judged(case(), capture(*CHUNKS), COMPOSITE, ScriptedGateway(script(**SEED_002), model=MODEL))
    assert_ok(s["wp_correctness"], 3)
    assert_ok(s["wp_faithfulness"], 1.0)  # 1-5 view: 1 + 4·1.0 = 5.0
    assert_ok(s["wp_precision"], 2 / 3)  # 0.67 → 1 + 4·0.667 = 3.67 ≈ 3.7
    assert round(1 + 4 * s["wp_precision"].value, 1) == 3.7
    assert_ok(s["wp_recall"], 1.0)  # → 5.0
    assert_ok(s["wp_relevance"], 4)  # weight 0: does not count
    # composite = 0.4·correctness + 0.2·faithfulness + 0.2·precision + 0.2·recall + 0·relevance (1-5 views)
    #           = 0.4·3 + 0.2·5.0 + 0.2·3.667 + 0.2·5.0 + 0·4
    #           = 1.2   + 1.0     + 0.7333    + 1.0     + 0   = 3.9333
    assert_ok(s["wp_composite"], 0.4 * 3 + 0.2 * 5 + 0.2 * (1 + 4 * 2 / 3) + 0.2 * 5, tol=1e-9)
    assert s["wp_composite"].value == pytest.approx(3.933, abs=1e-3)
    assert s["wp_composite"].reason is None


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        ("correctness", 3.0),
        ("faithfulness", 5.0),
        ("precision", 1 + 4 * 2 / 3),
        ("recall", 5.0),
        ("relevance", 4.0),
    ],
)
def test_wp_composite_puts_each_part_on_the_1_5_view(part, expected):
    config = ScoringConfig(k=K, wp_weights={part: 1.0})  # the weights are run configuration
    s = judged(case(), capture(*CHUNKS), ["wp_composite"], ScriptedGateway(script(**SEED_002), model=MODEL), config)
    assert_ok(s["wp_composite"], expected)


def test_wp_composite_renormalises_over_nan_components():
    # no chunks: precision undefined; faithfulness and recall 1.0 (no_context) → 5.0 on the 1-5 view
    s = judged(case(), capture(), ["wp_composite"], ScriptedGateway(script(**SEED_002), model=MODEL))
    # (0.4·3 + 0.2·5 + 0.2·5) / (0.4 + 0.2 + 0.2) = 3.2 / 0.8 = 4.0
    assert_ok(s["wp_composite"], 4.0)
    assert s["wp_composite"].reason == "renormalised_without:precision"


def test_wp_composite_with_a_failed_component_fails_the_same_way():
    for status in ("judge_error", "parse_error", "skipped"):
        answers = dict(SEED_002, wp_correctness=failure(status, "wp_correctness"))
        s = judged(
            case(),
            capture(*CHUNKS),
            ["wp_correctness", "wp_composite"],
            ScriptedGateway(script(**answers), model=MODEL),
        )
        assert_nan(s["wp_correctness"], status)
        assert_nan(s["wp_composite"], status)
        assert "correctness" in s["wp_composite"].reason


def test_wp_composite_ignores_a_failed_zero_weight_component():
    answers = dict(SEED_002, wp_relevance=failure("judge_error", "wp_relevance"))
    s = judged(
        case(), capture(*CHUNKS), ["wp_relevance", "wp_composite"], ScriptedGateway(script(**answers), model=MODEL)
    )
    assert_nan(s["wp_relevance"], "judge_error")
    assert_ok(s["wp_composite"], 3.9333, tol=1e-3)


def test_composite_failure_severity():
    # a judge_error beats a parse_error beats a skip, whichever component carries it
    answers = dict(
        SEED_002,
        wp_correctness=failure("skipped", "wp_correctness"),
        wp_fact_check=failure("parse_error", "wp_fact_check"),
    )
    s = judged(case(), capture(*CHUNKS), ["wp_composite"], ScriptedGateway(script(**answers), model=MODEL))
    assert_nan(s["wp_composite"], "parse_error")


# ---- faithfulness (claims → verdicts) ----------------------------------------------------------------


def test_faithfulness_is_supported_claims_over_claims():
    gw = ScriptedGateway(
        script(extract_claims={"claims": ["c1", "c2", "c3"]}, verify_claims=verdicts(1, 0, 1)), model=MODEL
    )
    s = judged(case(), capture(*CHUNKS), ["faithfulness"], gw)["faithfulness"]
    assert_ok(s, 2 / 3)
    assert (s.prompt_id, s.prompt_version) == ("extract_claims+verify_claims", "1+1")  # every prompt of the step
    assert asked(gw) == ["extract_claims", "verify_claims"]
    claims = gw.calls[1][1]["claims"]
    assert claims == "1. c1\n2. c2\n3. c3"


def test_faithfulness_without_claims_is_one_and_asks_no_verification():
    gw = ScriptedGateway(script(extract_claims={"claims": []}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), ["faithfulness"], gw)["faithfulness"]
    assert_ok(s, 1.0)
    assert s.reason == "no_claims"
    assert asked(gw) == ["extract_claims"]


def test_faithfulness_with_verdicts_for_the_wrong_claims_is_a_parse_error():
    gw = ScriptedGateway(script(extract_claims={"claims": ["c1", "c2"]}, verify_claims=verdicts(1)), model=MODEL)
    assert_nan(judged(case(), capture(*CHUNKS), ["faithfulness"], gw)["faithfulness"], "parse_error")


@pytest.mark.parametrize("step_prompt", ["extract_claims", "verify_claims"])
def test_faithfulness_fails_when_either_step_fails(step_prompt):
    gw = ScriptedGateway(script(**{step_prompt: failure("judge_error", step_prompt)}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), ["faithfulness"], gw)["faithfulness"]
    assert_nan(s, "judge_error")
    assert s.judge_model == MODEL and s.prompt_id == "extract_claims+verify_claims"


# ---- context precision, AP, recall ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "mean", "ap"),
    [
        # [0,1,1,0]: precision@2 = 1/2, precision@3 = 2/3 → AP = (1/2 + 2/3) / 2 = 0.58333
        ((False, True, True, False), 0.5, (1 / 2 + 2 / 3) / 2),
        # [1,0,0,1]: (1/1 + 2/4) / 2 = 0.75
        ((True, False, False, True), 0.5, (1 + 2 / 4) / 2),
        ((True, True, True, True), 1.0, 1.0),
        ((False, False, False, False), 0.0, 0.0),
    ],
)
def test_context_precision_and_its_average_precision(flags, mean, ap):
    gw = ScriptedGateway(script(context_precision=relevance(*flags)), model=MODEL)
    s = judged(case(), capture(*FOUR), ["context_precision", "context_precision_ap"], gw, ScoringConfig(k=4))
    assert_ok(s["context_precision"], mean)
    assert_ok(s["context_precision_ap"], ap)
    assert asked(gw) == ["context_precision"]  # one call serves both
    assert average_precision(list(flags)) == pytest.approx(ap)


def test_context_precision_with_a_verdict_missing_is_a_parse_error():
    gw = ScriptedGateway(script(context_precision=relevance(True, False)), model=MODEL)  # 2 verdicts for 3 chunks
    s = judged(case(), capture(*CHUNKS), ["context_precision", "context_precision_ap"], gw)
    assert_nan(s["context_precision"], "parse_error")
    assert_nan(s["context_precision_ap"], "parse_error")


def test_context_recall_is_attributed_statements_over_statements():
    gw = ScriptedGateway(
        script(extract_statements={"statements": ["s1", "s2", "s3"]}, attribute_statements=attributions(1, 0, 1)),
        model=MODEL,
    )
    s = judged(case(), capture(*CHUNKS), ["context_recall"], gw)["context_recall"]
    assert_ok(s, 2 / 3)
    assert asked(gw) == ["extract_statements", "attribute_statements"]


def test_context_recall_without_statements_is_one():
    gw = ScriptedGateway(script(extract_statements={"statements": []}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), ["context_recall"], gw)["context_recall"]
    assert_ok(s, 1.0)
    assert asked(gw) == ["extract_statements"]


def test_context_recall_without_chunks_is_zero():
    gw = ScriptedGateway(script(extract_statements={"statements": ["s1", "s2"]}), model=MODEL)
    s = judged(case(), capture(), ["context_recall"], gw)["context_recall"]
    assert_ok(s, 0.0)
    assert asked(gw) == ["extract_statements"]  # nothing to attribute to


# ---- answer relevance (generated questions, the run's embedder) and ragas_score --------------------


RELEVANCE = (1.0 + 0.6 + 0.0) / 3  # the three cosines with the question


def test_answer_relevance_is_the_mean_cosine_of_the_generated_questions():
    gw = ScriptedGateway(script(generate_questions={"questions": GENERATED}), model=MODEL)
    enc = stub_encoder()
    s = judged(case(), capture(*CHUNKS), ["answer_relevance"], gw, encoder=enc)["answer_relevance"]
    assert_ok(s, RELEVANCE, tol=1e-6)
    assert s.model == "stub@0" and s.judge_model == MODEL and s.prompt_id == "generate_questions"
    assert set(enc.embedder.encoded) == {QUESTION, *GENERATED}


def test_answer_relevance_of_an_abstention_is_undefined():
    gw = ScriptedGateway(script(generate_questions={"questions": GENERATED}), model=MODEL)
    s = judged(
        case(),
        capture(*CHUNKS, answer="I could not find this in the notes."),
        ["answer_relevance"],
        gw,
        encoder=stub_encoder(),
    )["answer_relevance"]
    assert_nan(s, "undefined", "abstained")


def test_ragas_score_weights():
    gw = ScriptedGateway(script(**RAGAS_PARTS), model=MODEL)
    s = judged(case(), capture(*FOUR), ["ragas_score"], gw, ScoringConfig(k=4), stub_encoder())["ragas_score"]
    # 0.3·0.6667 + 0.2·0.5 + 0.2·0.6667 + 0.3·0.5333 = 0.2 + 0.1 + 0.1333 + 0.16 = 0.5933
    assert_ok(s, 0.3 * 2 / 3 + 0.2 * 0.5 + 0.2 * 2 / 3 + 0.3 * RELEVANCE, tol=1e-6)
    assert s.reason is None


def test_ragas_score_renormalises_without_a_reference():
    # no reference: context_precision and context_recall undefined → weights 0.3 + 0.3 renormalised
    gw = ScriptedGateway(script(**RAGAS_PARTS), model=MODEL)
    names = ["faithfulness", "context_precision", "context_recall", "answer_relevance", "ragas_score"]
    s = judged(case(reference_answer=None), capture(*FOUR), names, gw, ScoringConfig(k=4), stub_encoder())
    assert_nan(s["context_precision"], "undefined", "no_reference")
    assert_nan(s["context_recall"], "undefined", "no_reference")
    # (0.3·2/3 + 0.3·0.5333) / 0.6 = (0.2 + 0.16) / 0.6 = 0.6
    assert_ok(s["ragas_score"], (0.3 * 2 / 3 + 0.3 * RELEVANCE) / 0.6, tol=1e-6)
    assert s["ragas_score"].reason == "renormalised_without:context_precision,context_recall"
    assert not {"context_precision", "extract_statements"} & set(asked(gw))


def test_ragas_score_with_a_failed_component_fails():
    gw = ScriptedGateway(
        script(**dict(RAGAS_PARTS, generate_questions=failure("parse_error", "generate_questions"))), model=MODEL
    )
    s = judged(case(), capture(*FOUR), ["ragas_score"], gw, ScoringConfig(k=4), stub_encoder())["ragas_score"]
    assert_nan(s, "parse_error")
    assert s.reason.startswith("answer_relevance")


# ---- factual accuracy and its grade -----------------------------------------------------------------


def geval(correctness: float, completeness: float, consistency: float) -> dict[str, Any]:
    return {
        k: {"score": v, "reasoning": "r"}
        for k, v in (("correctness", correctness), ("completeness", completeness), ("consistency", consistency))
    }


@pytest.mark.parametrize(
    ("scores", "expected", "letter"),
    [
        ((80, 60, 100), (0.5 * 80 + 0.3 * 60 + 0.2 * 100) / 100, "B"),  # 0.78
        ((100, 100, 100), 1.0, "A"),
        ((90, 70, 70), 0.80, "A"),  # 45 + 21 + 14 = 80 → exactly the A cut-off
        ((40, 40, 40), 0.40, "C"),
        ((0, 50, 25), 0.20, "D"),
        ((10, 10, 10), 0.10, "E"),
    ],
)
def test_factual_accuracy_and_grade(scores, expected, letter):
    gw = ScriptedGateway(script(factual_accuracy=geval(*scores)), model=MODEL)
    s = judged(case(), capture(*CHUNKS), ["factual_accuracy"], gw)["factual_accuracy"]
    assert_ok(s, expected)
    assert grade(s.value) == letter


@pytest.mark.parametrize(
    ("value", "letter"),
    [
        (1.0, "A"),
        (0.8, "A"),
        (0.7999, "B"),
        (0.6, "B"),
        (0.5999, "C"),
        (0.4, "C"),
        (0.3999, "D"),
        (0.2, "D"),
        (0.1999, "E"),
        (0.0, "E"),
        (float("nan"), "–"),
    ],
)
def test_grade_cut_offs(value, letter):
    assert grade(value) == letter


# ---- answer class --------------------------------------------------------------------------------------


CLASSES = ["answer_class_correct", "answer_class_wrong", "answer_class_dont_know"]


def test_an_uncertainty_phrase_is_dont_know_without_a_call():
    gw = ScriptedGateway(script(answer_class={"class": "CORRECT"}), model=MODEL)
    s = judged(case(), capture(*CHUNKS, answer="I don't know which database Atlas uses."), CLASSES, gw)
    assert_ok(s["answer_class_dont_know"], 1)
    assert_ok(s["answer_class_correct"], 0)
    assert_ok(s["answer_class_wrong"], 0)
    assert "answer_class" not in asked(gw)


@pytest.mark.parametrize("cls", ["CORRECT", "WRONG"])
def test_otherwise_the_judge_classifies(cls):
    gw = ScriptedGateway(script(answer_class={"class": cls, "reasoning": "r"}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), CLASSES, gw)
    assert_ok(s["answer_class_correct"], float(cls == "CORRECT"))
    assert_ok(s["answer_class_wrong"], float(cls == "WRONG"))
    assert_ok(s["answer_class_dont_know"], 0)
    assert asked(gw) == ["answer_class"]
    assert s["answer_class_wrong"].prompt_id == "answer_class"
