"""ndcg_at_k when one chunk matches several gold supports (issue 10, item 1b; METRICS.md §2): the
chunk credits the uncredited support with the best grade, so the order of gold_supports never
changes a value. Values worked out by hand; log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2."""

from __future__ import annotations

import math

import pytest

from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_one

A = {"rel_path": "g.md", "heading_path": "A"}
A_B = {"rel_path": "g.md", "heading_path": "A > B"}
A_B_C = {"rel_path": "g.md", "heading_path": "A > B > C"}
A_X = {"rel_path": "g.md", "heading_path": "A > X"}
OTHER = {"rel_path": "other.md", "heading_path": "Other"}


def _ndcg(supports: list[dict], *chunks: dict, k: int = 5, **kw) -> float:
    case = GoldenCase.model_validate({"id": "c", "question": "q?", "gold_supports": supports, **kw})
    capture = Capture.model_validate(
        {
            "case_id": "c",
            "answer": "a",
            "retrieved": [dict(rank=r, text="t", **c) for r, c in enumerate(chunks, start=1)],
        }
    )
    s = score_one(case, capture, "ndcg_at_k", k=k)
    assert s.status == "ok", s
    return s.value


@pytest.mark.parametrize(
    "supports",
    [
        [A, dict(A_B, required=True)],
        [dict(A_B, required=True), A],
    ],
    ids=["general-first", "specific-first"],
)
def test_issue_example_takes_the_best_grade_whatever_the_order(supports):
    # rank 1 "A > B > C" matches both supports: it credits "A > B" (required: grade 2), gain 2^2 − 1 = 3
    # DCG  = 3 / log2(2)                    = 3
    # IDCG = 3 / log2(2) + 1 / log2(3)      = 3 + 0.6309298 = 3.6309298 (both supports, grades 2 and 1)
    # nDCG = 0.8262285 (was 0.275 with the general support listed first)
    assert _ndcg(supports, A_B_C) == pytest.approx(3 / (3 + 1 / math.log2(3)), abs=1e-12)


@pytest.mark.parametrize("supports", [[A, A_B], [A_B, A]], ids=["general-first", "specific-first"])
def test_equal_grades_credit_the_most_specific_support(supports):
    # both grade 1. rank 1 "A > B > C" matches both and credits the deeper "A > B"; rank 2 "A > X"
    # matches only "A", still uncredited → grade 1.
    # DCG  = 1/log2(2) + 1/log2(3) = 1.6309298 = IDCG → 1 (crediting "A" at rank 1 would give 0.6131472)
    assert _ndcg(supports, A_B_C, A_X) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_three_nested_supports_any_order(order):
    chain = [A, dict(A_B, snippets=["t"]), A_B_C]  # grades 1, 2, 1
    supports = [chain[i] for i in order]
    # rank 1 "A > B > C" matches all three: credits "A > B" (grade 2, gain 3)
    # rank 2 "A > B > C" again: "A" and "A > B > C" left, both grade 1: credits the deeper "A > B > C" (gain 1)
    # rank 3 "A > X": "A" (gain 1)
    # DCG  = 3/1 + 1/log2(3) + 1/log2(4) = 3 + 0.6309298 + 0.5 = 4.1309298
    # IDCG = the same grades in the same order (2, 1, 1) → 1
    assert _ndcg(supports, A_B_C, A_B_C, A_X) == pytest.approx(1.0, abs=1e-12)
    # without rank 3: DCG = 3.6309298, IDCG = 4.1309298 → 0.8789609
    assert _ndcg(supports, A_B_C, A_B_C, OTHER) == pytest.approx(
        (3 + 1 / math.log2(3)) / (3 + 1 / math.log2(3) + 0.5), abs=1e-12
    )


def test_a_labelled_chunk_credits_the_best_support_too():
    # rank 1 "A > B > C" is labelled topical only (grade 1) and credits the best support "A > B"
    # (grade 2): it takes the higher grade, 2. "A > X" at rank 2 then credits "A" (grade 1).
    # DCG  = 3/1 + 1/log2(3) = 3.6309298 = IDCG → 1 (crediting "A" at rank 1: 1/3.6309298 = 0.2754116)
    labels = {"chunks": [dict(A_B_C, topically_relevant=1, evidence_sufficient=0)]}
    for supports in ([A, dict(A_B, required=True)], [dict(A_B, required=True), A]):
        assert _ndcg(supports, A_B_C, A_X, labels=labels) == pytest.approx(1.0, abs=1e-12)
    # labelled evidence-sufficient (grade 2) on a chunk matching only grade-1 supports: 2 wins
    # it credits the deeper "A > B": DCG = 3/1 = 3; IDCG: "A > B" raised to 2 (seen), "A" at 1
    #   = 3 + 1/log2(3) = 3.6309298 → 0.8262285
    labels = {"chunks": [dict(A_B_C, topically_relevant=1, evidence_sufficient=1)]}
    for supports in ([A, A_B], [A_B, A]):
        assert _ndcg(supports, A_B_C, labels=labels) == pytest.approx(3 / (3 + 1 / math.log2(3)), abs=1e-12)


def test_the_crediting_change_moved_the_version():
    assert get_metric("ndcg_at_k").version == "2"
