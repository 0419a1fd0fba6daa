"""Label metrics (METRICS.md §3, seed 000): chunk labels t/s/m over the top-K, answer labels from a
human annotation file or from the deterministic rule sources, human winning, and the dataset-level
conditional_fabrication_rate."""

from __future__ import annotations

import hashlib
import math

import pytest

from raglake.metrics.context import CaseContext, Label, ScoringConfig
from raglake.metrics.registry import Score, get_metric
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_one

A = {"rel_path": "notes/a.md", "heading_path": "A"}
A_SUB = {"rel_path": "notes/a.md", "heading_path": "A > Detail"}
B = {"rel_path": "notes/b.md", "heading_path": "B"}
C = {"rel_path": "notes/c.md", "heading_path": "C"}
D = {"rel_path": "notes/d.md", "heading_path": "D"}

ANSWER = "Atlas uses Postgres 16."

CHUNK_METRICS = (
    "topical_precision_at_k",
    "sufficiency_hit_at_k",
    "sufficiency_rate_at_k",
    "misleading_rate_at_k",
    "label_mrr_at_k",
    "label_ndcg_at_k",
)
# metric → answer label; none of these has a rule source
HUMAN_ONLY_ANSWER_METRICS = {
    "grounding_presence_rate": "support_present",
    "unsupported_claim_rate": "unsupported_claim_present",
    "contradiction_rate": "contradicted_claim_present",
    "on_topic_rate": "response_on_topic",
    "helpfulness_rate": "helpful",
    "incompleteness_rate": "incomplete",
    "unsafe_content_rate": "unsafe_content",
}
ANSWER_METRICS = {
    **HUMAN_ONLY_ANSWER_METRICS,
    "citation_presence_rate": "source_cited",
    "proper_action_rate": "proper_action",
}


def sha(answer: str, n: int = 16) -> str:
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()[:n]


def case(**kw) -> GoldenCase:
    data = {"id": "c", "question": "Which database does Atlas use?"}
    data.update(kw)
    return GoldenCase.model_validate(data)


def capture(*chunks: dict, **kw) -> Capture:
    data = {
        "case_id": "c",
        "method": "m1",
        "answer": ANSWER,
        "retrieved": [dict(rank=i, text="t", **c) for i, c in enumerate(chunks, start=1)],
    }
    data.update(kw)
    return Capture.model_validate(data)


def assert_ok(s: Score, expected: float, source: str | None = None) -> None:
    assert s.status == "ok", (s.status, s.reason)
    assert s.value == pytest.approx(expected, abs=1e-9)
    if source is not None:
        assert s.source == source


def assert_undefined(s: Score, reason: str | None = None) -> None:
    assert s.status == "undefined"
    assert math.isnan(s.value)
    assert s.reason
    if reason is not None:
        assert s.reason == reason


# ---- chunk labels ----------------------------------------------------------------------------
# K = 5, three chunks returned (ranks 4, 5 missing → not relevant, denominators stay 5):
#   r1 → A > Detail, under label A: t=0 s=0 m=1 (grade 0)
#   r2 → B:                         t=1 s=0 m=0 (grade 1)
#   r3 → C:                         t=1 s=1 m=0 (grade 2)

CHUNK_LABELS = [
    dict(A, topically_relevant=0, evidence_sufficient=0, misleading=1),
    dict(B, topically_relevant=1, evidence_sufficient=0, misleading=0),
    dict(C, topically_relevant=1, evidence_sufficient=1, misleading=0),
    dict(D, topically_relevant=1, evidence_sufficient=1, misleading=0),  # not retrieved
]


def labelled_case() -> GoldenCase:
    return case(labels={"chunks": CHUNK_LABELS})


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("topical_precision_at_k", 2 / 5),  # (0 + 1 + 1 + 0 + 0) / 5
        ("sufficiency_rate_at_k", 1 / 5),  # (0 + 0 + 1 + 0 + 0) / 5
        ("misleading_rate_at_k", 1 / 5),  # (1 + 0 + 0 + 0 + 0) / 5
        ("sufficiency_hit_at_k", 1.0),  # Σ s = 1 ≥ 1
        ("label_mrr_at_k", 1 / 2),  # first t=1 at rank 2
        # grades (0, 1, 2): DCG  = 0 + 1/log2(3) + 3/log2(4) = 0.6309298 + 1.5 = 2.1309298
        # IDCG over the labelled top-K (2, 1, 0) = 3/log2(2) + 1/log2(3) = 3.6309298 → 0.5868797
        ("label_ndcg_at_k", (1 / math.log2(3) + 1.5) / (3 + 1 / math.log2(3))),
    ],
)
def test_chunk_label_metrics(metric, expected):
    s = score_one(labelled_case(), capture(A_SUB, B, C), metric, k=5)
    assert_ok(s, expected, source="human")


def test_chunk_label_metrics_k_cutoff():
    # K = 2: only r1 (t=0, s=0, m=1) and r2 (t=1, s=0) count
    cap = capture(A_SUB, B, C)
    assert_ok(score_one(labelled_case(), cap, "topical_precision_at_k", k=2), 1 / 2)
    assert_ok(score_one(labelled_case(), cap, "sufficiency_rate_at_k", k=2), 0.0)
    assert_ok(score_one(labelled_case(), cap, "sufficiency_hit_at_k", k=2), 0.0)
    assert_ok(score_one(labelled_case(), cap, "misleading_rate_at_k", k=2), 1 / 2)
    assert_ok(score_one(labelled_case(), cap, "label_mrr_at_k", k=2), 1 / 2)
    # grades (0, 1): DCG = 1/log2(3); IDCG = 1/log2(2) = 1 → 0.6309298
    assert_ok(score_one(labelled_case(), cap, "label_ndcg_at_k", k=2), 1 / math.log2(3))


def test_label_mrr_none_relevant_is_zero():
    c = case(labels={"chunks": [dict(A, topically_relevant=0, evidence_sufficient=0, misleading=0)]})
    assert_ok(score_one(c, capture(A, A_SUB), "label_mrr_at_k"), 0.0)
    assert_ok(score_one(c, capture(A, A_SUB), "sufficiency_hit_at_k"), 0.0)


def test_label_ndcg_ideal_order_is_one():
    # grades (2, 1) at ranks 1, 2: DCG = IDCG → 1
    c = case(labels={"chunks": CHUNK_LABELS})
    assert_ok(score_one(c, capture(C, B), "label_ndcg_at_k"), 1.0)


def test_label_ndcg_idcg_zero_is_undefined():
    c = case(labels={"chunks": [dict(A, topically_relevant=0, evidence_sufficient=0, misleading=0)]})
    assert_undefined(score_one(c, capture(A, A_SUB), "label_ndcg_at_k"), "idcg_zero")


@pytest.mark.parametrize("metric", CHUNK_METRICS)
def test_unlabelled_rank_is_undefined(metric):
    # r2 → notes/x.md has no label → the case value cannot be computed
    s = score_one(labelled_case(), capture(B, {"rel_path": "notes/x.md", "heading_path": "X"}, C), metric)
    assert_undefined(s)
    assert "2" in s.reason


@pytest.mark.parametrize("metric", CHUNK_METRICS)
def test_no_labels_is_undefined(metric):
    assert_undefined(score_one(case(), capture(A, B), metric))


def test_chunk_label_takes_most_specific_anchor():
    c = case(
        labels={
            "chunks": [
                dict(A, topically_relevant=0, evidence_sufficient=0, misleading=0),
                dict(A_SUB, topically_relevant=1, evidence_sufficient=1, misleading=0),
            ]
        }
    )
    # r1 → 'A > Detail > More' lies under both labels; the deeper one (t=1) applies: 1/1
    cap = capture({"rel_path": "notes/a.md", "heading_path": "A > Detail > More"})
    assert_ok(score_one(c, cap, "topical_precision_at_k", k=1), 1.0)


@pytest.mark.parametrize("metric", CHUNK_METRICS + tuple(ANSWER_METRICS) + ("conditional_fabrication_rate",))
def test_failed_capture_is_undefined(metric):
    labels = {"chunks": CHUNK_LABELS, "answers": [{"method": "m1", **{v: 1 for v in ANSWER_METRICS.values()}}]}
    cap = Capture.model_validate({"case_id": "c", "method": "m1", "status": "timeout", "answer": ""})
    assert_undefined(score_one(case(labels=labels), cap, metric), "capture_failed")


# ---- answer labels from a human annotation file ----------------------------------------------

HUMAN_ANSWER = {
    "support_present": 1,
    "unsupported_claim_present": 0,
    "contradicted_claim_present": 1,
    "source_cited": 0,
    "fabricated_source": 1,
    "proper_action": 0,
    "response_on_topic": 1,
    "helpful": 0,
    "incomplete": 1,
    "unsafe_content": 0,
}


@pytest.mark.parametrize(("metric", "label"), sorted(ANSWER_METRICS.items()))
def test_answer_rates_from_human_labels(metric, label):
    # the answer cites [1] and is a proper answer, so the rules would say z=1, d=1: the human 0 wins
    answer = ANSWER + " [1]"
    labels = {"answers": [{"method": "m1", "answer_sha256": sha(answer), **HUMAN_ANSWER}]}
    cap = capture(A, answer=answer)
    s = score_one(case(labels=labels), cap, metric)
    assert_ok(s, float(HUMAN_ANSWER[label]), source="human")


@pytest.mark.parametrize("value", [0, 1])
@pytest.mark.parametrize(("metric", "label"), sorted(HUMAN_ONLY_ANSWER_METRICS.items()))
def test_answer_rates_both_values(metric, label, value):
    labels = {"answers": [{"method": "m1", label: value}]}
    assert_ok(score_one(case(labels=labels), capture(A), metric), float(value), source="human")


@pytest.mark.parametrize("metric", sorted(HUMAN_ONLY_ANSWER_METRICS))
def test_answer_rates_without_label_are_undefined(metric):
    assert_undefined(score_one(case(), capture(A), metric))


@pytest.mark.parametrize(
    "entry",
    [
        {"method": "m2"},  # another method
        {"method": "m1", "answer_sha256": sha("a different answer")},  # another answer
        {"answer_sha256": sha("a different answer")},
    ],
)
@pytest.mark.parametrize("metric", sorted(HUMAN_ONLY_ANSWER_METRICS))
def test_answer_label_for_another_method_or_answer_is_ignored(entry, metric):
    labels = {"answers": [{**entry, **HUMAN_ANSWER}]}
    assert_undefined(score_one(case(labels=labels), capture(A), metric))


def test_answer_label_hash_is_a_prefix_of_the_answer_sha256():
    for n in (8, 12, 64):
        labels = {"answers": [{"answer_sha256": sha(ANSWER, n), "helpful": 1}]}
        assert_ok(score_one(case(labels=labels), capture(A), "helpfulness_rate"), 1.0, source="human")


def test_ignored_human_label_falls_back_to_rule():
    # the human says z=0, but for another method: the rule (references present → z=1) applies
    labels = {"answers": [{"method": "m2", "source_cited": 0}]}
    cap = capture(A, references=[A])
    assert_ok(score_one(case(labels=labels), cap, "citation_presence_rate"), 1.0, source="rule")


# ---- rule sources: z (source_cited) ------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "refs", "expected"),
    [
        ("Atlas uses Postgres 16 [1].", [], 1),
        ("Atlas uses Postgres 16 [1, 3].", [], 1),
        ("Atlas uses Postgres 16 [Source 12].", [], 1),
        ("Atlas uses Postgres 16, see [[Atlas]].", [], 1),
        ("Atlas uses Postgres 16, see [[atlas|the Atlas note]].", [], 1),
        ("Atlas uses Postgres 16 (work/atlas.md).", [], 1),
        ("It says so in atlas.md.", [], 1),
        ("Atlas uses Postgres 16.", [A], 1),  # non-empty references
        ("Atlas uses Postgres 16.", [], 0),
        ("Atlas uses Postgres 16, as listed [below].", [], 0),
        ("Atlas uses Postgres 16 (version 16.2).", [], 0),
    ],
)
def test_rule_source_cited(answer, refs, expected):
    s = score_one(case(), capture(A, answer=answer, references=refs), "citation_presence_rate")
    assert_ok(s, float(expected), source="rule")


# ---- rule sources: f (fabricated_source) via conditional_fabrication_rate ----------------------


def test_rule_fabricated_source_cited_path_not_retrieved():
    # z=1 (references), the cited notes/ghost.md is in no retrieved chunk → f=1
    cap = capture(A, B, references=[A, {"rel_path": "notes/ghost.md"}])
    assert_ok(score_one(case(), cap, "conditional_fabrication_rate"), 1.0, source="rule")


def test_rule_no_fabrication_when_every_cited_path_was_retrieved():
    cap = capture(A, B, references=[{"rel_path": "notes/a.md", "heading_path": "A > Other"}, B])
    assert_ok(score_one(case(), cap, "conditional_fabrication_rate"), 0.0, source="rule")


def test_rule_fabricated_source_beyond_top_k_is_still_retrieved():
    # 'a retrieved chunk' is any chunk the target returned, not only the top-K
    cap = capture(A, B, C, references=[C])
    assert_ok(score_one(case(), cap, "conditional_fabrication_rate", k=1), 0.0)


def test_rule_fabricated_source_known_to_the_index_manifest():
    cap = capture(A, references=[{"rel_path": "notes/ghost.md"}])
    ctx = CaseContext(case(), cap, ScoringConfig(), known_docs=frozenset({"notes/ghost.md"}))
    [(_, s)] = score_context(ctx, [get_metric("conditional_fabrication_rate")])
    assert_ok(s, 0.0, source="rule")


def test_rule_fabricated_rel_path_cited_in_answer_text():
    # METRICS.md §3: a rel_path in the answer is a citation marker (z=1), and "f=1 when a cited
    # source matches no retrieved chunk and no document of the index manifest".
    cap = capture(A, answer="Atlas uses Postgres 16 (see notes/ghost.md).")
    assert_ok(score_one(case(), cap, "citation_presence_rate"), 1.0, source="rule")
    assert_ok(score_one(case(), cap, "conditional_fabrication_rate"), 1.0)


def test_conditional_fabrication_undefined_without_citation():
    s = score_one(case(), capture(A, answer="Atlas uses Postgres 16."), "conditional_fabrication_rate")
    assert_undefined(s)


def test_conditional_fabrication_human_wins_over_rule():
    # the rule says f=1 (ghost.md not retrieved); the human says f=0
    labels = {"answers": [{"method": "m1", "answer_sha256": sha(ANSWER), "fabricated_source": 0}]}
    cap = capture(A, references=[{"rel_path": "notes/ghost.md"}])
    assert_ok(score_one(case(labels=labels), cap, "conditional_fabrication_rate"), 0.0, source="human")
    # and a human z=0 makes the case drop out of Σz, whatever f is
    labels = {"answers": [{"method": "m1", "source_cited": 0, "fabricated_source": 1}]}
    assert_undefined(score_one(case(labels=labels), cap, "conditional_fabrication_rate"))


def test_judge_label_between_human_and_rule():
    cap = capture(A, answer="Atlas uses Postgres 16 [1].")  # rule: z=1
    judge = {"source_cited": Label(0, "judge:gpt-x")}
    ctx = CaseContext(case(), cap, ScoringConfig(), judge_labels=judge)
    [(_, s)] = score_context(ctx, [get_metric("citation_presence_rate")])
    assert_ok(s, 0.0, source="judge:gpt-x")  # judge beats rule
    human = case(labels={"answers": [{"method": "m1", "source_cited": 1}]})
    ctx = CaseContext(human, cap, ScoringConfig(), judge_labels=judge)
    [(_, s)] = score_context(ctx, [get_metric("citation_presence_rate")])
    assert_ok(s, 1.0, source="human")  # human beats judge


# ---- rule sources: d (proper_action) ----------------------------------------------------------


@pytest.mark.parametrize(
    ("case_kw", "cap_kw", "expected"),
    [
        # expected_action defaults to 'answer' when answerable, 'refuse' when not
        ({}, {"answer": "Atlas uses Postgres 16."}, 1),
        ({}, {"answer": "I could not find this in the notes.", "abstained": True}, 0),
        ({}, {"answer": "I don't know."}, 0),  # phrase → abstained
        ({"answerable": False}, {"answer": "I could not find this in the notes.", "abstained": True}, 1),
        ({"answerable": False}, {"answer": "I don't know."}, 1),
        ({"answerable": False}, {"answer": "Your password is hunter2.", "abstained": False}, 0),
        ({"expected_action": "clarify"}, {"answer": "Do you mean the Atlas project or the Atlas library?"}, 1),
        ({"expected_action": "clarify"}, {"answer": "Atlas uses Postgres 16."}, 0),
        ({}, {"answer": "Do you mean the Atlas project or the Atlas library?"}, 0),
        ({"expected_action": "refuse"}, {"answer": "Atlas uses Postgres 16."}, 0),
    ],
)
def test_rule_proper_action(case_kw, cap_kw, expected):
    s = score_one(case(**case_kw), capture(A, **cap_kw), "proper_action_rate")
    assert_ok(s, float(expected), source="rule")


def test_proper_action_human_wins_over_rule():
    labels = {"answers": [{"method": "m1", "proper_action": 0}]}
    s = score_one(case(labels=labels), capture(A, answer="Atlas uses Postgres 16."), "proper_action_rate")
    assert_ok(s, 0.0, source="human")


# ---- dataset level: conditional_fabrication_rate = Σ z·f / Σ z ---------------------------------


def _dataset_value(pairs: list[tuple[GoldenCase, Capture]]) -> tuple[float, int]:
    """The catalogue's aggregate: mean over `ok` rows, and n."""
    rows = [score_one(c, cap, "conditional_fabrication_rate") for c, cap in pairs]
    values = [s.value for s in rows if s.status == "ok"]
    return (sum(values) / len(values) if values else math.nan), len(values)


def test_conditional_fabrication_dataset_level():
    ghost = {"rel_path": "notes/ghost.md"}
    pairs = [
        # z=1 f=1: cites ghost.md, which no chunk holds (rule)
        (case(id="1"), capture(A, case_id="1", references=[ghost])),
        # z=1 f=0: cites a retrieved note (rule)
        (case(id="2"), capture(A, case_id="2", references=[A])),
        # z=0 f=0: no citation at all (rule)
        (case(id="3"), capture(A, case_id="3", answer="Atlas uses Postgres 16.")),
        # z=1 f=0: a [1] marker, no references (rule)
        (case(id="4"), capture(A, case_id="4", answer="Atlas uses Postgres 16 [1].")),
        # z=1 f=1 (human)
        (case(id="5", labels={"answers": [{"source_cited": 1, "fabricated_source": 1}]}), capture(A, case_id="5")),
        # z=0 f=1 (human): z·f = 0, and it is not in Σz
        (case(id="6", labels={"answers": [{"source_cited": 0, "fabricated_source": 1}]}), capture(A, case_id="6")),
    ]
    # z = (1, 1, 0, 1, 1, 0), f = (1, 0, 0, 0, 1, 1)
    # Σ z·f = 1 + 0 + 0 + 0 + 1 + 0 = 2; Σ z = 4 → 2/4 = 0.5
    value, n = _dataset_value(pairs)
    assert n == 4
    assert value == pytest.approx(0.5)


def test_conditional_fabrication_dataset_level_no_citations_is_undefined():
    pairs = [
        (case(id="1"), capture(A, case_id="1", answer="Atlas uses Postgres 16.")),
        (case(id="2", labels={"answers": [{"source_cited": 0, "fabricated_source": 1}]}), capture(A, case_id="2")),
    ]
    # Σ z = 0 → no ok rows → NaN, never 0
    value, n = _dataset_value(pairs)
    assert n == 0
    assert math.isnan(value)
