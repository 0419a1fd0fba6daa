"""The arithmetic of every LLM-judged metric (METRICS.md §5) from parsed judge outputs: a scripted
judge (tests/judgekit.ScriptedGateway) answers through the real judge steps, or StepOutcome objects
are built by hand. Failures are data: a judge_error / parse_error / skipped outcome is a Score with
that status, NaN and the reason, never 0; no judge → skipped (no_judge) unless the case makes the
metric undefined."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.judge.gateway import JudgeResult
from raglake.judge.steps import StepOutcome
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.judge import average_precision, grade
from raglake.metrics.registry import Score, all_metrics, get_metric
from raglake.schemas import Capture, GoldenCase
from raglake.scoring import score_batch, score_context
from tests.judgekit import LABELS, ScriptedGateway, canned, judge_outcomes

MODEL = "scripted-judge"
K = 3
QUESTION = "Which database does Atlas use?"
ANSWER = "Atlas uses Postgres 16 [1]."
REFERENCE = "Atlas uses Postgres 16."
CHUNKS = ("We run Postgres 16.", "Atlas launched in May.", "Billing runs on Stripe.")
JUDGE_METRICS = [m.name for m in all_metrics(level="case") if m.family == "judge"]


def case(**kw: Any) -> GoldenCase:
    data: dict[str, Any] = {"id": "c", "question": QUESTION, "reference_answer": REFERENCE}
    data.update(kw)
    return GoldenCase.model_validate(data)


def capture(*texts: str, answer: str = ANSWER, **kw: Any) -> Capture:
    data: dict[str, Any] = {
        "case_id": "c", "method": "m1", "answer": answer,
        "retrieved": [{"rank": i, "rel_path": f"notes/{i}.md", "heading_path": f"H{i}", "text": t}
                      for i, t in enumerate(texts, start=1)],
    }
    data.update(kw)
    return Capture.model_validate(data)


def script(**outputs: Any) -> Callable[[str, dict[str, Any]], Any]:
    """The judge's answer per prompt id: a dict, a JudgeResult, or a function of the values; else canned."""
    def answer(prompt_id: str, values: dict[str, Any]) -> Any:
        out = outputs.get(prompt_id)
        if callable(out) and not isinstance(out, JudgeResult):
            return out(values)
        return canned(prompt_id, values) if out is None else out

    return answer


def failure(status: str, prompt_id: str, reason: str | None = None) -> JudgeResult:
    reason = reason or {"judge_error": "judge_error: HTTP 500 (after 5 attempt(s))",
                        "parse_error": "parse_error: score: 9 is greater than the maximum of 5",
                        "skipped": "budget"}[status]
    return JudgeResult(status, reason=reason, model=MODEL, prompt_id=prompt_id, prompt_version=1)


def judged(c: GoldenCase, cap: Capture, names: list[str], gateway: ScriptedGateway | None = None,
           config: ScoringConfig | None = None, encoder: Any = None) -> dict[str, Score]:
    """Scores of `names` for one case, the judge steps run through the scripted gateway."""
    config = config or ScoringConfig(k=K)
    metrics = [get_metric(n) for n in names]
    outcomes = judge_outcomes([(c, cap)], metrics, config, gateway or ScriptedGateway(model=MODEL), encoder)[c.id]
    ctx = CaseContext(c, cap, config, judge=outcomes)
    return {m.name: s for m, s in score_context(ctx, metrics)}


def scored(c: GoldenCase, cap: Capture, names: list[str], judge: dict[str, StepOutcome] | None,
           config: ScoringConfig | None = None) -> dict[str, Score]:
    """Scores from hand-built step outcomes (judge=None: no judge configured)."""
    ctx = CaseContext(c, cap, config or ScoringConfig(k=K), judge=judge)
    return {m.name: s for m, s in score_context(ctx, [get_metric(n) for n in names])}


def done(data: dict[str, Any], prompt_id: str = "p", model: str = MODEL) -> StepOutcome:
    return StepOutcome("ok", data, model=model, prompt_id=prompt_id, prompt_version=1)


def assert_ok(s: Score, expected: float, tol: float = 1e-9) -> None:
    assert s.status == "ok", (s.status, s.reason)
    assert s.value == pytest.approx(expected, abs=tol), s


def assert_nan(s: Score, status: str, reason: str | None = None) -> None:
    assert s.status == status, (s.status, s.reason)
    assert math.isnan(s.value), s.value
    assert s.reason, "a non-ok score carries a reason"
    if reason is not None:
        assert s.reason == reason


def asked(gw: ScriptedGateway) -> list[str]:
    return [pid for pid, _ in gw.calls]


# ---- 0-5 and 1-5 single-prompt scores ------------------------------------------------------------


@pytest.mark.parametrize(("metric", "prompt", "output", "expected"), [
    ("groundedness", "groundedness", {"score": 2, "supported_claims": ["a"], "unsupported_claims": ["b", "c"], "reasoning": "r"}, 2),
    ("groundedness", "groundedness", {"score": 0, "supported_claims": [], "unsupported_claims": ["b"], "reasoning": "r"}, 0),
    ("correctness", "correctness", {"score": 5, "reasoning": "r"}, 5),
    ("correctness", "correctness", {"score": 0, "reasoning": "r"}, 0),
    ("wp_correctness", "wp_correctness", {"score": 1, "reasoning": "r"}, 1),
    ("wp_correctness", "wp_correctness", {"score": 5, "reasoning": "r"}, 5),
    ("wp_relevance", "wp_relevance", {"score": 2, "reasoning": "r"}, 2),
])
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


def fact_check(answer_facts: list[list[int]], chunks_used: list[int], indistinct: bool = False,
               reference_facts: list[list[int]] = ()) -> dict[str, Any]:
    return {"answer_facts": [{"fact": f"a{i}", "supported_by": s} for i, s in enumerate(answer_facts)],
            "answer_is_indistinct": indistinct,
            "reference_facts": [{"fact": f"r{i}", "supported_by": s} for i, s in enumerate(reference_facts)],
            "chunks_used": chunks_used}


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


SEED_002 = dict(
    wp_correctness={"score": 3, "reasoning": "partly aligned"},
    wp_relevance={"score": 4, "reasoning": "addresses it"},
    # two answer facts, both supported (faithfulness 1.0, recall 1.0); 2 of the 3 chunks used (precision 2/3)
    wp_fact_check=fact_check([[1], [2]], [1, 2], reference_facts=[[1]]),
)
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


@pytest.mark.parametrize(("part", "expected"), [
    ("correctness", 3.0), ("faithfulness", 5.0), ("precision", 1 + 4 * 2 / 3), ("recall", 5.0), ("relevance", 4.0),
])
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
        s = judged(case(), capture(*CHUNKS), ["wp_correctness", "wp_composite"],
                   ScriptedGateway(script(**answers), model=MODEL))
        assert_nan(s["wp_correctness"], status)
        assert_nan(s["wp_composite"], status)
        assert "correctness" in s["wp_composite"].reason


def test_wp_composite_ignores_a_failed_zero_weight_component():
    answers = dict(SEED_002, wp_relevance=failure("judge_error", "wp_relevance"))
    s = judged(case(), capture(*CHUNKS), ["wp_relevance", "wp_composite"], ScriptedGateway(script(**answers), model=MODEL))
    assert_nan(s["wp_relevance"], "judge_error")
    assert_ok(s["wp_composite"], 3.9333, tol=1e-3)


def test_composite_failure_severity():
    # a judge_error beats a parse_error beats a skip, whichever component carries it
    answers = dict(SEED_002, wp_correctness=failure("skipped", "wp_correctness"),
                   wp_fact_check=failure("parse_error", "wp_fact_check"))
    s = judged(case(), capture(*CHUNKS), ["wp_composite"], ScriptedGateway(script(**answers), model=MODEL))
    assert_nan(s["wp_composite"], "parse_error")


# ---- faithfulness (claims → verdicts) ----------------------------------------------------------------


def verdicts(*v: int) -> Callable[[dict], dict]:
    return lambda values: {"verdicts": [{"claim": i, "verdict": x} for i, x in enumerate(v, start=1)]}


def test_faithfulness_is_supported_claims_over_claims():
    gw = ScriptedGateway(script(extract_claims={"claims": ["c1", "c2", "c3"]}, verify_claims=verdicts(1, 0, 1)), model=MODEL)
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


FOUR = CHUNKS + ("Atlas moved to Postgres in 2024.",)


def relevance(*flags: bool) -> Callable[[dict], dict]:
    return lambda values: {"verdicts": [{"chunk": i, "is_relevant": f} for i, f in enumerate(flags, start=1)]}


@pytest.mark.parametrize(("flags", "mean", "ap"), [
    # [0,1,1,0]: precision@2 = 1/2, precision@3 = 2/3 → AP = (1/2 + 2/3) / 2 = 0.58333
    ((False, True, True, False), 0.5, (1 / 2 + 2 / 3) / 2),
    # [1,0,0,1]: (1/1 + 2/4) / 2 = 0.75
    ((True, False, False, True), 0.5, (1 + 2 / 4) / 2),
    ((True, True, True, True), 1.0, 1.0),
    ((False, False, False, False), 0.0, 0.0),
])
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


def attributions(*a: int) -> Callable[[dict], dict]:
    return lambda values: {"attributions": [{"statement": i, "attributed": x} for i, x in enumerate(a, start=1)]}


def test_context_recall_is_attributed_statements_over_statements():
    gw = ScriptedGateway(script(extract_statements={"statements": ["s1", "s2", "s3"]},
                                attribute_statements=attributions(1, 0, 1)), model=MODEL)
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


def unit(*v: float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


GENERATED = ["What database backs Atlas?", "Which Postgres version?", "When did Atlas launch?"]
VECTORS = {QUESTION: unit(1, 0, 0), GENERATED[0]: unit(1, 0, 0), GENERATED[1]: unit(0.6, 0.8, 0),
           GENERATED[2]: unit(0, 1, 0)}
RELEVANCE = (1.0 + 0.6 + 0.0) / 3  # the three cosines with the question


class StubEmbedder:
    key, dimension = "stub@0", 3

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts) -> np.ndarray:
        self.encoded += list(texts)
        return np.stack([VECTORS[t] for t in texts])


def stub_encoder() -> TextEncoder:
    stub = StubEmbedder()
    return TextEncoder(stub, EmbeddingCache(None, stub.key))  # type: ignore[arg-type]


def test_answer_relevance_is_the_mean_cosine_of_the_generated_questions():
    gw = ScriptedGateway(script(generate_questions={"questions": GENERATED}), model=MODEL)
    enc = stub_encoder()
    s = judged(case(), capture(*CHUNKS), ["answer_relevance"], gw, encoder=enc)["answer_relevance"]
    assert_ok(s, RELEVANCE, tol=1e-6)
    assert s.model == "stub@0" and s.judge_model == MODEL and s.prompt_id == "generate_questions"
    assert set(enc.embedder.encoded) == {QUESTION, *GENERATED}


def test_answer_relevance_of_an_abstention_is_undefined():
    gw = ScriptedGateway(script(generate_questions={"questions": GENERATED}), model=MODEL)
    s = judged(case(), capture(*CHUNKS, answer="I could not find this in the notes."), ["answer_relevance"], gw,
               encoder=stub_encoder())["answer_relevance"]
    assert_nan(s, "undefined", "abstained")


RAGAS_PARTS = dict(
    extract_claims={"claims": ["c1", "c2", "c3"]}, verify_claims=verdicts(1, 0, 1),            # faithfulness 2/3
    context_precision=relevance(False, True, True, False),                                     # 0.5
    extract_statements={"statements": ["s1", "s2", "s3"]}, attribute_statements=attributions(1, 1, 0),  # 2/3
    generate_questions={"questions": GENERATED},                                               # 0.5333
)


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
    gw = ScriptedGateway(script(**dict(RAGAS_PARTS, generate_questions=failure("parse_error", "generate_questions"))),
                         model=MODEL)
    s = judged(case(), capture(*FOUR), ["ragas_score"], gw, ScoringConfig(k=4), stub_encoder())["ragas_score"]
    assert_nan(s, "parse_error")
    assert s.reason.startswith("answer_relevance")


# ---- factual accuracy and its grade -----------------------------------------------------------------


def geval(correctness: float, completeness: float, consistency: float) -> dict[str, Any]:
    return {k: {"score": v, "reasoning": "r"} for k, v in
            (("correctness", correctness), ("completeness", completeness), ("consistency", consistency))}


@pytest.mark.parametrize(("scores", "expected", "letter"), [
    ((80, 60, 100), (0.5 * 80 + 0.3 * 60 + 0.2 * 100) / 100, "B"),  # 0.78
    ((100, 100, 100), 1.0, "A"),
    ((90, 70, 70), 0.80, "A"),  # 45 + 21 + 14 = 80 → exactly the A cut-off
    ((40, 40, 40), 0.40, "C"),
    ((0, 50, 25), 0.20, "D"),
    ((10, 10, 10), 0.10, "E"),
])
def test_factual_accuracy_and_grade(scores, expected, letter):
    gw = ScriptedGateway(script(factual_accuracy=geval(*scores)), model=MODEL)
    s = judged(case(), capture(*CHUNKS), ["factual_accuracy"], gw)["factual_accuracy"]
    assert_ok(s, expected)
    assert grade(s.value) == letter


@pytest.mark.parametrize(("value", "letter"), [
    (1.0, "A"), (0.8, "A"), (0.7999, "B"), (0.6, "B"), (0.5999, "C"), (0.4, "C"), (0.3999, "D"), (0.2, "D"),
    (0.1999, "E"), (0.0, "E"), (float("nan"), "–"),
])
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


# ---- abstention: explicit field, then the judge, then the phrases --------------------------------------


ABSTAIN_METRICS = ["abstention_accuracy", "hallucination_rate_unanswerable"]
UNANSWERABLE = dict(answerable=False, reference_answer="The notes do not say.", question="What is my bank password?")


def test_abstention_explicit_field_wins_over_the_judge():
    gw = ScriptedGateway(script(abstention={"abstained": True}), model=MODEL)
    s = judged(case(**UNANSWERABLE), capture(answer="It is hunter2.", abstained=False), ABSTAIN_METRICS, gw)
    assert_ok(s["abstention_accuracy"], 0)
    assert_ok(s["hallucination_rate_unanswerable"], 1)
    assert s["abstention_accuracy"].source == "abstained_field"
    assert "abstention" not in asked(gw)  # the field decides: no call


@pytest.mark.parametrize(("answer", "judge_says", "expected"), [
    ("It is hunter2.", True, 1.0),  # phrases would say "answered"; the judge says abstained
    ("I could not find this in the notes.", False, 0.0),  # phrases would say "abstained"; the judge wins
])
def test_abstention_judge_when_the_field_is_missing(answer, judge_says, expected):
    gw = ScriptedGateway(script(abstention={"abstained": judge_says, "reasoning": "r"}), model=MODEL)
    s = judged(case(**UNANSWERABLE), capture(answer=answer), ABSTAIN_METRICS, gw)
    assert_ok(s["abstention_accuracy"], expected)
    assert_ok(s["hallucination_rate_unanswerable"], 1 - expected)
    assert s["abstention_accuracy"].source == f"judge:{MODEL}"
    assert asked(gw) == ["abstention"]


def test_abstention_phrases_when_there_is_no_judge():
    s = scored(case(**UNANSWERABLE), capture(answer="I could not find this in the notes."), ABSTAIN_METRICS, None)
    assert_ok(s["abstention_accuracy"], 1)
    assert s["abstention_accuracy"].source == "uncertainty_phrases"
    s = scored(case(**UNANSWERABLE), capture(answer="It is hunter2."), ABSTAIN_METRICS, None)
    assert_ok(s["abstention_accuracy"], 0)
    assert_ok(s["hallucination_rate_unanswerable"], 1)


def test_abstention_judge_that_failed_falls_back_to_the_phrases():
    gw = ScriptedGateway(script(abstention=failure("judge_error", "abstention")), model=MODEL)
    s = judged(case(**UNANSWERABLE), capture(answer="I could not find this in the notes."), ABSTAIN_METRICS, gw)
    assert_ok(s["abstention_accuracy"], 1)
    assert s["abstention_accuracy"].source == "uncertainty_phrases"


def test_abstention_is_not_asked_for_answerable_cases():
    gw = ScriptedGateway(model=MODEL)
    s = judged(case(), capture(*CHUNKS), ABSTAIN_METRICS, gw)
    assert_nan(s["abstention_accuracy"], "undefined", "answerable")
    assert asked(gw) == []


# ---- judge-filled labels (seed 000) ----------------------------------------------------------------------


ANSWER_LABEL_METRICS = {"grounding_presence_rate": "support_present", "unsupported_claim_rate": "unsupported_claim_present",
                        "contradiction_rate": "contradicted_claim_present", "on_topic_rate": "response_on_topic",
                        "helpfulness_rate": "helpful", "incompleteness_rate": "incomplete",
                        "unsafe_content_rate": "unsafe_content"}
LABELLED = {"support_present": 1, "unsupported_claim_present": 0, "contradicted_claim_present": 0,
            "response_on_topic": 1, "helpful": 0, "incomplete": 1, "unsafe_content": 0, "reasoning": "r"}


def test_label_answer_fills_the_answer_labels():
    gw = ScriptedGateway(script(label_answer=LABELLED), model=MODEL)
    s = judged(case(), capture(*CHUNKS), list(ANSWER_LABEL_METRICS), gw)
    for metric, label in ANSWER_LABEL_METRICS.items():
        assert_ok(s[metric], LABELLED[label])
        assert s[metric].source == f"judge:{MODEL}"
    assert asked(gw) == ["label_answer"]


def _sha(answer: str) -> str:
    return hashlib.sha256(answer.encode()).hexdigest()[:16]


def test_human_answer_labels_win_over_the_judge():
    human = {"answers": [{"method": "m1", "answer_sha256": _sha(ANSWER), "support_present": 0, "helpful": 1}]}
    gw = ScriptedGateway(script(label_answer=LABELLED), model=MODEL)
    s = judged(case(labels=human), capture(*CHUNKS), list(ANSWER_LABEL_METRICS), gw)
    assert_ok(s["grounding_presence_rate"], 0)
    assert s["grounding_presence_rate"].source == "human"
    assert_ok(s["helpfulness_rate"], 1)
    assert s["helpfulness_rate"].source == "human"
    assert_ok(s["incompleteness_rate"], 1)  # no human label: the judge's
    assert s["incompleteness_rate"].source == f"judge:{MODEL}"


def test_no_label_answer_call_when_humans_gave_every_label():
    human = {"answers": [{"method": "m1", **{k: 1 for k in LABELS}}]}
    gw = ScriptedGateway(model=MODEL)
    s = judged(case(labels=human), capture(*CHUNKS), list(ANSWER_LABEL_METRICS), gw)
    assert asked(gw) == []
    assert all(x.source == "human" for x in s.values())


def chunk_labels(*rows: tuple[int, int, int]) -> Callable[[dict], dict]:
    return lambda values: {"chunks": [{"chunk": i, "topically_relevant": t, "evidence_sufficient": e, "misleading": m}
                                      for i, (t, e, m) in enumerate(rows, start=1)]}


CHUNK_METRICS = ["topical_precision_at_k", "sufficiency_rate_at_k", "misleading_rate_at_k", "sufficiency_hit_at_k",
                 "label_mrr_at_k"]


def test_label_chunks_fills_the_chunk_labels():
    gw = ScriptedGateway(script(label_chunks=chunk_labels((0, 0, 1), (1, 1, 0), (1, 0, 0))), model=MODEL)
    s = judged(case(), capture(*CHUNKS), CHUNK_METRICS, gw)
    assert_ok(s["topical_precision_at_k"], 2 / 3)
    assert_ok(s["sufficiency_rate_at_k"], 1 / 3)
    assert_ok(s["misleading_rate_at_k"], 1 / 3)
    assert_ok(s["sufficiency_hit_at_k"], 1)
    assert_ok(s["label_mrr_at_k"], 1 / 2)  # first topically relevant chunk at rank 2
    assert {x.source for x in s.values()} == {f"judge:{MODEL}"}


def test_human_chunk_labels_win_over_the_judge():
    human = {"chunks": [{"rel_path": "notes/1.md", "heading_path": "H1", "topically_relevant": 1}]}
    gw = ScriptedGateway(script(label_chunks=chunk_labels((0, 0, 1), (1, 1, 0), (1, 0, 0))), model=MODEL)
    s = judged(case(labels=human), capture(*CHUNKS), CHUNK_METRICS, gw)
    assert_ok(s["topical_precision_at_k"], 3 / 3)  # rank 1: the human's 1 beats the judge's 0
    assert s["topical_precision_at_k"].source == f"human+judge:{MODEL}"
    assert_ok(s["label_mrr_at_k"], 1)
    assert_ok(s["misleading_rate_at_k"], 1 / 3)  # no human value for misleading: the judge's


def test_judge_labels_land_in_the_labels_rows_with_their_source():
    gw = ScriptedGateway(script(label_answer=LABELLED, label_chunks=chunk_labels((0, 0, 1), (1, 1, 0), (1, 0, 0))),
                         model=MODEL)
    metrics = [get_metric(n) for n in [*ANSWER_LABEL_METRICS, *CHUNK_METRICS]]
    c, cap = case(), capture(*CHUNKS)
    config = ScoringConfig(k=K)
    outcomes = judge_outcomes([(c, cap)], metrics, config, gw)
    batch = score_batch([(c, cap)], metrics, config, judge=outcomes)
    rows = [dict(zip(batch.labels, r)) for r in zip(*batch.labels.values())]
    answer_rows = {r["label"]: r for r in rows if r["level"] == "answer" and r["label_source"] == f"judge:{MODEL}"}
    assert answer_rows["support_present"]["value"] == 1 and answer_rows["helpful"]["value"] == 0
    chunk_rows = {(r["rank"], r["label"]): r["value"] for r in rows
                  if r["level"] == "chunk" and r["label_source"] == f"judge:{MODEL}"}
    assert chunk_rows.get((1, "misleading")) == 1 and chunk_rows.get((2, "evidence_sufficient")) == 1, (
        f"judge chunk labels missing from the labels rows: {sorted(chunk_rows)}")


# ---- recency_rule_ok acknowledge_both via the judge ----------------------------------------------------


JAN = {"rel_path": "work/meetings/jan.md", "heading_path": "January sync > Launch"}
APR = {"rel_path": "work/meetings/apr.md", "heading_path": "April retro > Launch"}
CONFLICT = dict(gold_supports=[dict(JAN, date="2025-01-10"), dict(APR, date="2025-04-02")],
                recency_conflict_rule="acknowledge_both", question="When is the launch?")


@pytest.mark.parametrize("ack", [1, 0])
def test_recency_acknowledge_both_asks_the_judge(ack):
    gw = ScriptedGateway(script(acknowledges_conflict={"acknowledges_conflict": ack, "reasoning": "r"}), model=MODEL)
    s = judged(case(**CONFLICT), capture(answer="May (moved from March).", references=[JAN, APR]), ["recency_rule_ok"], gw)
    assert_ok(s["recency_rule_ok"], ack)
    assert s["recency_rule_ok"].source == f"judge:{MODEL}"
    assert asked(gw) == ["acknowledges_conflict"]


def test_recency_acknowledge_both_citing_one_note_needs_no_judge():
    gw = ScriptedGateway(model=MODEL)
    s = judged(case(**CONFLICT), capture(answer="May.", references=[APR]), ["recency_rule_ok"], gw)
    assert_ok(s["recency_rule_ok"], 0)
    assert asked(gw) == []


def test_recency_acknowledge_both_human_label_wins():
    answer = "May (moved from March)."
    human = {"answers": [{"method": "m1", "answer_sha256": _sha(answer), "acknowledges_conflict": 0}]}
    gw = ScriptedGateway(script(acknowledges_conflict={"acknowledges_conflict": 1}), model=MODEL)
    s = judged(case(labels=human, **CONFLICT), capture(answer=answer, references=[JAN, APR]), ["recency_rule_ok"], gw)
    assert_ok(s["recency_rule_ok"], 0)
    assert s["recency_rule_ok"].source == "human"
    assert asked(gw) == []


@pytest.mark.parametrize("status", ["judge_error", "parse_error", "skipped"])
def test_recency_acknowledge_both_judge_failure_is_data(status):
    gw = ScriptedGateway(script(acknowledges_conflict=failure(status, "acknowledges_conflict")), model=MODEL)
    s = judged(case(**CONFLICT), capture(answer="May.", references=[JAN, APR]), ["recency_rule_ok"], gw)
    assert_nan(s["recency_rule_ok"], status)


# ---- failures are data ----------------------------------------------------------------------------------


# metric -> (the prompt whose failure it reports, the case it needs); single-prompt metrics and the
# multi-step ones failing at their first step
FAILING = {
    "groundedness": "groundedness", "correctness": "correctness", "wp_correctness": "wp_correctness",
    "wp_relevance": "wp_relevance", "wp_faithfulness": "wp_fact_check", "wp_precision": "wp_fact_check",
    "wp_recall": "wp_fact_check", "faithfulness": "extract_claims", "context_precision": "context_precision",
    "context_precision_ap": "context_precision", "context_recall": "extract_statements",
    "answer_relevance": "generate_questions", "factual_accuracy": "factual_accuracy",
    "answer_class_correct": "answer_class", "answer_class_wrong": "answer_class", "answer_class_dont_know": "answer_class",
}
# what a score row records: every prompt of the metric's step (sorted), with their versions
RECORDED = {"faithfulness": ("extract_claims+verify_claims", "1+1"),
            "context_recall": ("attribute_statements+extract_statements", "1+1")}


@pytest.mark.parametrize("status", ["judge_error", "parse_error", "skipped"])
@pytest.mark.parametrize("metric", sorted(FAILING))
def test_a_failed_judge_call_is_a_status_never_a_zero(metric, status):
    prompt = FAILING[metric]
    gw = ScriptedGateway(script(**{prompt: failure(status, prompt)}), model=MODEL)
    s = judged(case(), capture(*CHUNKS), [metric], gw, encoder=stub_encoder())[metric]
    assert_nan(s, status, failure(status, prompt).reason)
    assert (s.judge_model, s.prompt_id, s.prompt_version) == (MODEL, *RECORDED.get(metric, (prompt, "1")))


@pytest.mark.parametrize("status", ["judge_error", "parse_error", "skipped"])
def test_composites_fail_with_their_component(status):
    answers = {**RAGAS_PARTS, **SEED_002, "context_precision": failure(status, "context_precision"),
               "wp_fact_check": failure(status, "wp_fact_check")}
    s = judged(case(), capture(*FOUR), ["wp_composite", "ragas_score"], ScriptedGateway(script(**answers), model=MODEL),
               ScoringConfig(k=4), stub_encoder())
    assert_nan(s["wp_composite"], status)
    assert_nan(s["ragas_score"], status)


def test_hand_built_outcomes_feed_the_metrics():
    judge = {
        "groundedness": done({"score": 5, "supported_claims": [], "unsupported_claims": [], "reasoning": "r"}, "groundedness", "m-x"),
        "correctness": StepOutcome("skipped", reason="budget", model="m-x", prompt_id="correctness", prompt_version=1),
        "wp_correctness": StepOutcome("parse_error", reason="parse_error: empty reply", model="m-x",
                                      prompt_id="wp_correctness", prompt_version=1),
    }
    s = scored(case(), capture(*CHUNKS), ["groundedness", "correctness", "wp_correctness", "wp_relevance"], judge)
    assert_ok(s["groundedness"], 5)
    assert s["groundedness"].judge_model == "m-x"
    assert_nan(s["correctness"], "skipped", "budget")
    assert_nan(s["wp_correctness"], "parse_error", "parse_error: empty reply")
    assert (s["wp_correctness"].judge_model, s["wp_correctness"].prompt_id) == ("m-x", "wp_correctness")
    # a judge was configured but this step has no outcome: not judged, not a zero
    assert s["wp_relevance"].status == "skipped" and math.isnan(s["wp_relevance"].value)


# ---- no judge configured ----------------------------------------------------------------------------------


@pytest.mark.parametrize("metric", JUDGE_METRICS)
def test_no_judge_is_skipped_no_judge(metric):
    s = scored(case(), capture(*CHUNKS), [metric], None)[metric]
    assert_nan(s, "skipped", "no_judge")


# what the case alone decides, with no judge: metric -> (status, reason or None for "any")
NO_REFERENCE = {m: ("undefined", "no_reference") for m in (
    "wp_correctness", "context_precision", "context_precision_ap", "context_recall", "factual_accuracy",
    "answer_class_correct", "answer_class_wrong", "answer_class_dont_know")}
NO_CHUNKS = {"groundedness": ("undefined", "no_chunks"), "correctness": ("undefined", "no_chunks"),
             "faithfulness": ("undefined", "no_chunks"), "context_precision": ("undefined", "no_chunks"),
             "context_precision_ap": ("undefined", "no_chunks"), "wp_precision": ("undefined", "no_chunks"),
             "wp_faithfulness": ("ok", "no_context"), "wp_recall": ("ok", "no_context")}
EMPTY_ANSWER = {m: ("undefined", "empty_answer") for m in JUDGE_METRICS
                if m not in ("context_precision", "context_precision_ap", "context_recall", "ragas_score", "wp_composite")}
EMPTY_ANSWER["wp_composite"] = ("undefined", None)


@pytest.mark.parametrize(("kind", "c", "cap", "decided"), [
    ("no_reference", case(reference_answer=None), capture(*CHUNKS), NO_REFERENCE),
    ("no_chunks", case(), capture(), NO_CHUNKS),
    ("empty_answer", case(), capture(*CHUNKS, answer=""), EMPTY_ANSWER),
])
def test_no_judge_except_where_the_case_decides(kind, c, cap, decided):
    s = scored(c, cap, JUDGE_METRICS, None)
    for metric, score in s.items():
        status, reason = decided.get(metric, ("skipped", None))
        assert score.status == status, (kind, metric, score)
        if status == "ok":
            assert score.value == 1.0 and score.reason == reason, (kind, metric, score)
        else:
            assert math.isnan(score.value), (kind, metric, score)
            assert score.reason and (reason is None or score.reason == reason), (kind, metric, score)
        if status == "skipped":
            assert "no_judge" in score.reason, (kind, metric, score)


def test_the_scripted_judge_is_not_asked_where_the_case_decides():
    gw = ScriptedGateway(model=MODEL)
    judged(case(reference_answer=None), capture(answer=""), JUDGE_METRICS, gw, encoder=stub_encoder())
    assert asked(gw) == []  # empty answer, no reference, no chunks: nothing to judge
