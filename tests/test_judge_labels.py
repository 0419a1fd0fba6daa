"""Judge metrics beyond the scores: abstention (explicit field, judge, phrases), the labels a judge
fills (seed 000), recency_rule_ok via acknowledges_conflict, failures as data (a judge_error /
parse_error / skipped outcome is a Score with that status, NaN and the reason, never 0), and no judge
(skipped, no_judge, unless the case makes the metric undefined)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

import pytest

from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.metrics.steps import StepOutcome
from tests.judgecases import (
    ANSWER,
    CHUNKS,
    FOUR,
    JUDGE_METRICS,
    MODEL,
    RAGAS_PARTS,
    SEED_002,
    K,
    asked,
    assert_nan,
    assert_ok,
    capture,
    case,
    done,
    failure,
    judged,
    scored,
    script,
    stub_encoder,
)
from tests.judgekit import LABELS, ScriptedGateway, judge_outcomes
from tests.rowpath import score_batch

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


@pytest.mark.parametrize(
    ("answer", "judge_says", "expected"),
    [
        ("It is hunter2.", True, 1.0),  # phrases would say "answered"; the judge says abstained
        ("I could not find this in the notes.", False, 0.0),  # phrases would say "abstained"; the judge wins
    ],
)
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


ANSWER_LABEL_METRICS = {
    "grounding_presence_rate": "support_present",
    "unsupported_claim_rate": "unsupported_claim_present",
    "contradiction_rate": "contradicted_claim_present",
    "on_topic_rate": "response_on_topic",
    "helpfulness_rate": "helpful",
    "incompleteness_rate": "incomplete",
    "unsafe_content_rate": "unsafe_content",
}
LABELLED = {
    "support_present": 1,
    "unsupported_claim_present": 0,
    "contradicted_claim_present": 0,
    "response_on_topic": 1,
    "helpful": 0,
    "incomplete": 1,
    "unsafe_content": 0,
    "reasoning": "r",
}


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
    return lambda values: {
        "chunks": [
            {"chunk": i, "topically_relevant": t, "evidence_sufficient": e, "misleading": m}
            for i, (t, e, m) in enumerate(rows, start=1)
        ]
    }


CHUNK_METRICS = [
    "topical_precision_at_k",
    "sufficiency_rate_at_k",
    "misleading_rate_at_k",
    "sufficiency_hit_at_k",
    "label_mrr_at_k",
]


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
    gw = ScriptedGateway(
        script(label_answer=LABELLED, label_chunks=chunk_labels((0, 0, 1), (1, 1, 0), (1, 0, 0))), model=MODEL
    )
    metrics = [get_metric(n) for n in [*ANSWER_LABEL_METRICS, *CHUNK_METRICS]]
    c, cap = case(), capture(*CHUNKS)
    config = ScoringConfig(k=K)
    outcomes = judge_outcomes([(c, cap)], metrics, config, gw)
    batch = score_batch([(c, cap)], metrics, config, judge=outcomes)
    rows = [dict(zip(batch.labels, r)) for r in zip(*batch.labels.values())]
    answer_rows = {r["label"]: r for r in rows if r["level"] == "answer" and r["label_source"] == f"judge:{MODEL}"}
    assert answer_rows["support_present"]["value"] == 1 and answer_rows["helpful"]["value"] == 0
    chunk_rows = {
        (r["rank"], r["label"]): r["value"]
        for r in rows
        if r["level"] == "chunk" and r["label_source"] == f"judge:{MODEL}"
    }
    assert chunk_rows.get((1, "misleading")) == 1 and chunk_rows.get((2, "evidence_sufficient")) == 1, (
        f"judge chunk labels missing from the labels rows: {sorted(chunk_rows)}"
    )


# ---- recency_rule_ok acknowledge_both via the judge ----------------------------------------------------


JAN = {"rel_path": "work/meetings/jan.md", "heading_path": "January sync > Launch"}
APR = {"rel_path": "work/meetings/apr.md", "heading_path": "April retro > Launch"}
CONFLICT = dict(
    gold_supports=[dict(JAN, date="2025-01-10"), dict(APR, date="2025-04-02")],
    recency_conflict_rule="acknowledge_both",
    question="When is the launch?",
)


@pytest.mark.parametrize("ack", [1, 0])
def test_recency_acknowledge_both_asks_the_judge(ack):
    gw = ScriptedGateway(script(acknowledges_conflict={"acknowledges_conflict": ack, "reasoning": "r"}), model=MODEL)
    s = judged(
        case(**CONFLICT), capture(answer="May (moved from March).", references=[JAN, APR]), ["recency_rule_ok"], gw
    )
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
    "groundedness": "groundedness",
    "correctness": "correctness",
    "wp_correctness": "wp_correctness",
    "wp_relevance": "wp_relevance",
    "wp_faithfulness": "wp_fact_check",
    "wp_precision": "wp_fact_check",
    "wp_recall": "wp_fact_check",
    "faithfulness": "extract_claims",
    "context_precision": "context_precision",
    "context_precision_ap": "context_precision",
    "context_recall": "extract_statements",
    "answer_relevance": "generate_questions",
    "factual_accuracy": "factual_accuracy",
    "answer_class_correct": "answer_class",
    "answer_class_wrong": "answer_class",
    "answer_class_dont_know": "answer_class",
}
# what a score row records: every prompt of the metric's step (sorted), with their versions
RECORDED = {
    "faithfulness": ("extract_claims+verify_claims", "1+1"),
    "context_recall": ("attribute_statements+extract_statements", "1+1"),
}


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
    answers = {
        **RAGAS_PARTS,
        **SEED_002,
        "context_precision": failure(status, "context_precision"),
        "wp_fact_check": failure(status, "wp_fact_check"),
    }
    s = judged(
        case(),
        capture(*FOUR),
        ["wp_composite", "ragas_score"],
        ScriptedGateway(script(**answers), model=MODEL),
        ScoringConfig(k=4),
        stub_encoder(),
    )
    assert_nan(s["wp_composite"], status)
    assert_nan(s["ragas_score"], status)


def test_hand_built_outcomes_feed_the_metrics():
    judge = {
        "groundedness": done(
            {"score": 5, "supported_claims": [], "unsupported_claims": [], "reasoning": "r"}, "groundedness", "m-x"
        ),
        "correctness": StepOutcome("skipped", reason="budget", model="m-x", prompt_id="correctness", prompt_version=1),
        "wp_correctness": StepOutcome(
            "parse_error", reason="parse_error: empty reply", model="m-x", prompt_id="wp_correctness", prompt_version=1
        ),
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
NO_REFERENCE = {
    m: ("undefined", "no_reference")
    for m in (
        "wp_correctness",
        "context_precision",
        "context_precision_ap",
        "context_recall",
        "factual_accuracy",
        "answer_class_correct",
        "answer_class_wrong",
        "answer_class_dont_know",
    )
}
NO_CHUNKS = {
    "groundedness": ("undefined", "no_chunks"),
    "correctness": ("undefined", "no_chunks"),
    "faithfulness": ("undefined", "no_chunks"),
    "context_precision": ("undefined", "no_chunks"),
    "context_precision_ap": ("undefined", "no_chunks"),
    "wp_precision": ("undefined", "no_chunks"),
    "wp_faithfulness": ("ok", "no_context"),
    "wp_recall": ("ok", "no_context"),
}
EMPTY_ANSWER = {
    m: ("undefined", "empty_answer")
    for m in JUDGE_METRICS
    if m not in ("context_precision", "context_precision_ap", "context_recall", "ragas_score", "wp_composite")
}
EMPTY_ANSWER["wp_composite"] = ("undefined", None)


@pytest.mark.parametrize(
    ("kind", "c", "cap", "decided"),
    [
        ("no_reference", case(reference_answer=None), capture(*CHUNKS), NO_REFERENCE),
        ("no_chunks", case(), capture(), NO_CHUNKS),
        ("empty_answer", case(), capture(*CHUNKS, answer=""), EMPTY_ANSWER),
    ],
)
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
