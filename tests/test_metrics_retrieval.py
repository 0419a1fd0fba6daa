"""Retrieval metrics (METRICS.md §2) on small hand-built cases, every expected value worked out by hand."""

from __future__ import annotations

import hashlib
import math

import pytest

from raglake.metrics.registry import Score
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_one

RETRIEVAL_METRICS = (
    "recall_any_at_k",
    "recall_all_at_k",
    "mrr_at_k",
    "precision_at_k",
    "ndcg_at_k",
    "scope_miss",
    "attribution_hit",
    "recency_rule_ok",
)

# anchors used throughout
ATLAS_DB = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database"}
ATLAS_DB_VERSION = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database > Version"}
ATLAS_DBX = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Databases"}  # not under Atlas > Database
BILLING = {"rel_path": "work/billing.md", "heading_path": "Billing > Status"}
AUTH = {"rel_path": "work/auth.md", "heading_path": "Auth"}
PLAN = {"rel_path": "work/plan.md", "heading_path": "Plan"}
OTHER = {"rel_path": "work/other.md", "heading_path": "Other"}
OTHER2 = {"rel_path": "personal/diary.md", "heading_path": "Monday"}
JAN = {"rel_path": "work/meetings/jan.md", "heading_path": "January sync > Launch"}
APR = {"rel_path": "work/meetings/apr.md", "heading_path": "April retro > Launch"}

ANSWER = "The launch moved to May."


def case(**kw) -> GoldenCase:
    data = {"id": "c", "question": "What?"}
    data.update(kw)
    return GoldenCase.model_validate(data)


def capture(*chunks: dict, ranks: list[int] | None = None, **kw) -> Capture:
    ranks = ranks or list(range(1, len(chunks) + 1))
    data = {
        "case_id": "c",
        "method": "m1",
        "answer": ANSWER,
        "retrieved": [dict(rank=r, text="some text", **c) for r, c in zip(ranks, chunks)],
    }
    data.update(kw)
    return Capture.model_validate(data)


def failed(status: str = "error") -> Capture:
    return Capture.model_validate({"case_id": "c", "status": status, "error": "boom", "answer": ""})


def assert_ok(s: Score, expected: float) -> None:
    assert isinstance(s, Score)
    assert s.status == "ok", (s.status, s.reason)
    assert s.value == pytest.approx(expected, abs=1e-9)


def assert_nan(s: Score, status: str, reason: str) -> None:
    assert isinstance(s, Score)
    assert s.status == status
    assert s.reason == reason
    assert math.isnan(s.value)  # never 0


# ---- shared undefined cases ------------------------------------------------------------------


@pytest.mark.parametrize("metric", RETRIEVAL_METRICS)
@pytest.mark.parametrize("status", ["error", "timeout"])
def test_failed_capture_is_undefined_capture_failed(metric, status):
    c = case(
        gold_supports=[dict(JAN, date="2025-01-10"), dict(APR, date="2025-04-02")],
        required_support_groups=[[0], [1]],
        recency_conflict_rule="cite_both",
    )
    assert_nan(score_one(c, failed(status), metric), "undefined", "capture_failed")


@pytest.mark.parametrize("metric", ["recall_any_at_k", "mrr_at_k", "precision_at_k", "attribution_hit"])
def test_unanswerable_is_undefined(metric):
    c = case(answerable=False, gold_supports=[ATLAS_DB])  # even with a support listed
    cap = capture(ATLAS_DB, references=[ATLAS_DB])
    assert_nan(score_one(c, cap, metric), "undefined", "not_answerable")


@pytest.mark.parametrize("metric", ["recall_any_at_k", "mrr_at_k", "precision_at_k", "attribution_hit"])
def test_no_gold_supports_is_undefined(metric):
    c = case()
    cap = capture(ATLAS_DB, references=[ATLAS_DB])
    assert_nan(score_one(c, cap, metric), "undefined", "no_gold_supports")


# ---- recall_any_at_k -------------------------------------------------------------------------


def test_recall_any_hit_at_rank_3():
    c = case(gold_supports=[ATLAS_DB, BILLING])
    # rank 3 lies under 'Atlas > Database' → 1
    assert_ok(score_one(c, capture(OTHER, ATLAS_DBX, ATLAS_DB_VERSION), "recall_any_at_k"), 1.0)


def test_recall_any_miss():
    c = case(gold_supports=[ATLAS_DB, BILLING])
    # 'Atlas > Databases' is not under 'Atlas > Database' → 0
    assert_ok(score_one(c, capture(OTHER, ATLAS_DBX, OTHER2), "recall_any_at_k"), 0.0)


def test_recall_any_no_chunks_is_zero_not_undefined():
    c = case(gold_supports=[ATLAS_DB])
    assert_ok(score_one(c, capture(), "recall_any_at_k"), 0.0)


def test_recall_any_k_cutoff():
    c = case(gold_supports=[BILLING])
    cap = capture(OTHER, OTHER, OTHER, OTHER, OTHER, BILLING)  # match at rank 6
    assert_ok(score_one(c, cap, "recall_any_at_k", k=5), 0.0)
    assert_ok(score_one(c, cap, "recall_any_at_k", k=6), 1.0)


def test_recall_any_uses_rank_not_position():
    c = case(gold_supports=[BILLING])
    cap = capture(OTHER, BILLING, ranks=[1, 7])  # the second chunk has rank 7
    assert_ok(score_one(c, cap, "recall_any_at_k", k=5), 0.0)


# ---- recall_all_at_k -------------------------------------------------------------------------

GROUPED = dict(gold_supports=[ATLAS_DB, BILLING, AUTH], required_support_groups=[[0], [1, 2]])


def test_recall_all_every_group_hit():
    # group [0] by rank 2, group [1, 2] by AUTH (support 2) at rank 3 → 1
    assert_ok(score_one(case(**GROUPED), capture(OTHER, ATLAS_DB_VERSION, AUTH), "recall_all_at_k"), 1.0)


def test_recall_all_one_group_missing():
    # only group [0] is hit → 0
    assert_ok(score_one(case(**GROUPED), capture(ATLAS_DB, OTHER), "recall_all_at_k"), 0.0)


def test_recall_all_k_cutoff():
    cap = capture(ATLAS_DB, OTHER, BILLING)  # group [1, 2] only at rank 3
    assert_ok(score_one(case(**GROUPED), cap, "recall_all_at_k", k=2), 0.0)
    assert_ok(score_one(case(**GROUPED), cap, "recall_all_at_k", k=3), 1.0)


def test_recall_all_no_chunks():
    assert_ok(score_one(case(**GROUPED), capture(), "recall_all_at_k"), 0.0)


def test_recall_all_no_required_groups_is_undefined():
    c = case(gold_supports=[ATLAS_DB, BILLING])
    assert_nan(score_one(c, capture(ATLAS_DB, BILLING), "recall_all_at_k"), "undefined", "no_required_groups")


def test_recall_all_unanswerable_without_groups_is_undefined():
    c = case(answerable=False)
    s = score_one(c, capture(OTHER), "recall_all_at_k")
    assert s.status == "undefined" and s.reason and math.isnan(s.value)


# ---- mrr_at_k --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunks", "ranks", "expected"),
    [
        ((ATLAS_DB, OTHER), None, 1.0),  # 1/1
        ((OTHER, OTHER2, BILLING, ATLAS_DB), None, 1 / 3),  # first match at rank 3
        ((OTHER, OTHER2), None, 0.0),  # none
        ((OTHER, ATLAS_DB), [2, 4], 0.25),  # rank 4 is the given rank, not the position
        ((OTHER, OTHER, OTHER, OTHER, OTHER, ATLAS_DB), None, 0.0),  # rank 6 > K = 5
        ((), None, 0.0),
    ],
)
def test_mrr(chunks, ranks, expected):
    c = case(gold_supports=[ATLAS_DB, BILLING])
    assert_ok(score_one(c, capture(*chunks, ranks=ranks), "mrr_at_k", k=5), expected)


# ---- precision_at_k --------------------------------------------------------------------------


def test_precision_three_of_five():
    c = case(gold_supports=[ATLAS_DB, BILLING])
    # ranks 1, 3, 4 match → 3/5
    cap = capture(ATLAS_DB, OTHER, BILLING, ATLAS_DB_VERSION, OTHER2)
    assert_ok(score_one(c, cap, "precision_at_k", k=5), 0.6)


def test_precision_missing_ranks_keep_denominator_k():
    c = case(gold_supports=[ATLAS_DB])
    # 2 chunks returned, 1 matches, K = 5 → 1/5 (not 1/2)
    assert_ok(score_one(c, capture(ATLAS_DB, OTHER), "precision_at_k", k=5), 0.2)
    # gaps in the ranks count as missing too: ranks 1 and 3 returned, both match → 2/4
    assert_ok(score_one(c, capture(ATLAS_DB, ATLAS_DB_VERSION, ranks=[1, 3]), "precision_at_k", k=4), 0.5)


def test_precision_counts_chunks_not_supports():
    c = case(gold_supports=[ATLAS_DB])
    # two chunks matching the same support both count: 2/4
    assert_ok(score_one(c, capture(ATLAS_DB, ATLAS_DB_VERSION, OTHER, OTHER2), "precision_at_k", k=4), 0.5)


def test_precision_chunk_matching_two_supports_counts_once():
    c = case(gold_supports=[{"rel_path": "work/atlas.md", "heading_path": "Atlas"}, ATLAS_DB])
    # rank 1 matches both supports → still one chunk: 1/2
    assert_ok(score_one(c, capture(ATLAS_DB_VERSION, OTHER), "precision_at_k", k=2), 0.5)


def test_precision_k_cutoff():
    c = case(gold_supports=[BILLING])
    cap = capture(OTHER, OTHER, BILLING)
    assert_ok(score_one(c, cap, "precision_at_k", k=2), 0.0)  # rank 3 = K+1 does not count
    assert_ok(score_one(c, cap, "precision_at_k", k=3), 1 / 3)


def test_precision_no_chunks_is_zero():
    assert_ok(score_one(case(gold_supports=[ATLAS_DB]), capture(), "precision_at_k"), 0.0)


# ---- ndcg_at_k -------------------------------------------------------------------------------
# DCG@K = Σ (2^g − 1) / log2(rank + 1); IDCG@K = DCG of the K best grades of the known relevant set.
# log2(2) = 1, log2(3) = 1.5849625, log2(4) = 2, log2(5) = 2.3219281, log2(6) = 2.5849625


def test_ndcg_grade_one_credit_once():
    c = case(gold_supports=[ATLAS_DB, BILLING])  # both plain → grade 1
    # r1 → ATLAS_DB (g=1), r2 → ATLAS_DB again (credited once → g=0), r3 → none, r4 → BILLING (g=1)
    # DCG  = 1/log2(2) + 0 + 0 + 1/log2(5) = 1 + 0.4306766 = 1.4306766
    # IDCG = 1/log2(2) + 1/log2(3)        = 1 + 0.6309298 = 1.6309298
    # nDCG = 0.8772153
    cap = capture(ATLAS_DB, ATLAS_DB_VERSION, OTHER, BILLING)
    assert_ok(score_one(c, cap, "ndcg_at_k", k=5), 0.8772153153380493)


def test_ndcg_duplicate_match_alone_cannot_exceed_one():
    c = case(gold_supports=[ATLAS_DB])
    # r1 and r2 both match the only support: DCG = 1 + 0 (credited once) = 1; IDCG = 1 → 1
    assert_ok(score_one(c, capture(ATLAS_DB, ATLAS_DB_VERSION), "ndcg_at_k"), 1.0)
    # r1 misses, r2 and r3 match: DCG = 1/log2(3) + 0 = 0.6309298; IDCG = 1 → 0.6309298
    assert_ok(score_one(c, capture(OTHER, ATLAS_DB, ATLAS_DB_VERSION), "ndcg_at_k"), 1 / math.log2(3))


def test_ndcg_grade_two_for_required_and_snippet_supports():
    c = case(
        gold_supports=[
            dict(AUTH, required=True),  # grade 2
            dict(PLAN, snippets=["launch in May"]),  # grade 2
            BILLING,  # grade 1
        ]
    )
    # r1 → BILLING (g=1), r2 → none, r3 → AUTH (g=2), r4 → PLAN (g=2, but rank 4 > K=3)
    cap = capture(BILLING, OTHER, AUTH, PLAN)
    # K=3: DCG  = 1/log2(2) + 0 + 3/log2(4)          = 1 + 1.5               = 2.5
    #      IDCG = 3/log2(2) + 3/log2(3) + 1/log2(4)  = 3 + 1.8927893 + 0.5   = 5.3927893
    #      nDCG = 0.4635820
    assert_ok(score_one(c, cap, "ndcg_at_k", k=3), 0.4635819942403664)
    # K=4: DCG  = 2.5 + 3/log2(5) = 2.5 + 1.2920297 = 3.7920297; IDCG unchanged (3 supports) → 0.7031667
    assert_ok(score_one(c, cap, "ndcg_at_k", k=4), 0.7031666714374551)


def test_ndcg_snippet_grade_two_without_require_snippets():
    c = case(gold_supports=[dict(PLAN, snippets=["launch in May"]), BILLING])
    # r1 → BILLING (g=1), r2 → PLAN (g=2)
    # DCG  = 1/1 + 3/log2(3) = 1 + 1.8927893 = 2.8927893
    # IDCG = 3/1 + 1/log2(3) = 3 + 0.6309298 = 3.6309298 → 0.7967076
    assert_ok(score_one(c, capture(BILLING, PLAN), "ndcg_at_k", require_snippets=False), 0.7967075809905066)


def test_ndcg_ideal_ranking_is_one():
    c = case(gold_supports=[BILLING, dict(AUTH, required=True)])
    # grades in order 2, 1 at ranks 1, 2: DCG = 3 + 1/log2(3) = IDCG → 1
    assert_ok(score_one(c, capture(AUTH, BILLING, OTHER), "ndcg_at_k"), 1.0)


def test_ndcg_no_match_is_zero_not_undefined():
    c = case(gold_supports=[BILLING])
    assert_ok(score_one(c, capture(OTHER, OTHER2), "ndcg_at_k"), 0.0)
    assert_ok(score_one(c, capture(), "ndcg_at_k"), 0.0)


def test_ndcg_k_cutoff():
    c = case(gold_supports=[BILLING])
    cap = capture(OTHER, OTHER2, BILLING)
    assert_ok(score_one(c, cap, "ndcg_at_k", k=2), 0.0)  # rank 3 = K+1 does not count
    # K=3: DCG = 1/log2(4) = 0.5; IDCG = 1 → 0.5
    assert_ok(score_one(c, cap, "ndcg_at_k", k=3), 0.5)


def test_ndcg_label_graded_without_supports():
    c = case(
        labels={
            "chunks": [
                dict(ATLAS_DB, topically_relevant=1, evidence_sufficient=0),  # grade 1
                dict(BILLING, topically_relevant=1, evidence_sufficient=1),  # grade 2
            ]
        }
    )
    # r1 → ATLAS_DB label (g=1), r2 → unlabelled (g=0), r3 → BILLING label (g=2)
    # DCG  = 1/log2(2) + 0 + 3/log2(4) = 1 + 1.5           = 2.5
    # IDCG = 3/log2(2) + 1/log2(3)     = 3 + 0.6309298     = 3.6309298
    # nDCG = 0.6885289
    cap = capture(ATLAS_DB_VERSION, OTHER, BILLING)
    assert_ok(score_one(c, cap, "ndcg_at_k", k=5), 0.6885288809404666)


def test_ndcg_labelled_match_takes_the_higher_of_label_and_support_grade():
    # METRICS.md §2: a labelled chunk matching a support takes the higher of the two grades
    c = case(
        gold_supports=[dict(AUTH, required=True), BILLING],  # support grades 2 and 1
        labels={
            "chunks": [
                dict(AUTH, topically_relevant=1, evidence_sufficient=0),  # label grade 1 < 2
                dict(BILLING, topically_relevant=1, evidence_sufficient=1),
            ]
        },  # label grade 2 > 1
    )
    # r1 → AUTH: max(1, 2) = 2; r2 → BILLING: max(2, 1) = 2
    # DCG  = 3/log2(2) + 3/log2(3) = 3 + 1.8927893 = 4.8927893
    # IDCG = the ideal set holds each support at the best grade seen (2, 2) → the same → 1
    assert_ok(score_one(c, capture(AUTH, BILLING), "ndcg_at_k"), 1.0)
    # r1 → OTHER (unlabelled, no support): 0; r2 → AUTH: max(1, 2) = 2. DCG = 3/log2(3) = 1.8927893
    # IDCG: AUTH at 2, BILLING at its support grade 1 (its label is never seen: not retrieved)
    #       = 3/log2(2) + 1/log2(3) = 3.6309298 → nDCG = 0.5212920
    assert_ok(score_one(c, capture(OTHER, AUTH), "ndcg_at_k"), (3 / math.log2(3)) / (3 + 1 / math.log2(3)))


def test_ndcg_labelled_irrelevant_match_keeps_its_support_grade():
    c = case(
        gold_supports=[BILLING],
        labels={"chunks": [dict(BILLING, topically_relevant=0, evidence_sufficient=0)]},
    )
    # r1 → BILLING, labelled irrelevant (0) but matching a grade-1 support: max(0, 1) = 1
    # DCG = 1; IDCG = 1 (the support) → 1
    assert_ok(score_one(c, capture(BILLING), "ndcg_at_k"), 1.0)


def test_ndcg_labelled_chunk_matching_no_support_joins_the_ideal_set():
    c = case(
        gold_supports=[BILLING],  # grade 1
        labels={"chunks": [dict(OTHER, topically_relevant=1, evidence_sufficient=1)]},  # grade 2, no support
    )
    # r1 → BILLING (g=1), r2 → OTHER labelled (g=2)
    # DCG  = 1/1 + 3/log2(3) = 2.8927893
    # IDCG = 3/1 + 1/log2(3) = 3.6309298 → 0.7967076
    assert_ok(score_one(c, capture(BILLING, OTHER), "ndcg_at_k"), 0.7967075809905066)


def test_ndcg_no_supports_no_labels_is_undefined():
    c = case(answerable=False)
    assert_nan(score_one(c, capture(OTHER), "ndcg_at_k"), "undefined", "no_gold_supports_or_labels")
    assert_nan(score_one(case(), capture(ATLAS_DB), "ndcg_at_k"), "undefined", "no_gold_supports_or_labels")


def test_ndcg_idcg_zero_is_undefined():
    c = case(
        labels={
            "chunks": [
                dict(OTHER, topically_relevant=0, evidence_sufficient=0),
                dict(OTHER2, topically_relevant=0, evidence_sufficient=0),
            ]
        }
    )
    # every known grade is 0 → IDCG = 0 → undefined, not 0 and not 0/0
    assert_nan(score_one(c, capture(OTHER, OTHER2), "ndcg_at_k"), "undefined", "idcg_zero")


# ---- scope_miss ------------------------------------------------------------------------------

PROJECT_SUPPORT = {"rel_path": "work/projects/atlas.md", "heading_path": "Atlas"}


@pytest.mark.parametrize(
    ("mode", "folders", "expected"),
    [
        ("on", ["work/projects"], 0.0),
        ("on", ["work"], 0.0),
        ("on", ["personal", "work/projects/"], 0.0),
        ("on_with_fallback", ["personal"], 1.0),
        ("on", ["work/proj"], 1.0),  # folder boundary
        ("on", [], 1.0),
    ],
)
def test_scope_miss(mode, folders, expected):
    c = case(gold_supports=[PROJECT_SUPPORT])
    cap = capture(OTHER, folder_mode=mode, selected_folders=folders)
    assert_ok(score_one(c, cap, "scope_miss"), expected)


def test_scope_miss_any_support_inside_is_not_a_miss():
    c = case(gold_supports=[{"rel_path": "personal/a.md"}, PROJECT_SUPPORT])
    assert_ok(score_one(c, capture(folder_mode="on", selected_folders=["work/projects"]), "scope_miss"), 0.0)


@pytest.mark.parametrize("mode", ["off", None])
def test_scope_miss_folder_mode_off_is_undefined(mode):
    c = case(gold_supports=[PROJECT_SUPPORT])
    cap = capture(OTHER, folder_mode=mode, selected_folders=["personal"])
    assert_nan(score_one(c, cap, "scope_miss"), "undefined", "folder_mode_off")


def test_scope_miss_no_supports_is_undefined():
    cap = capture(OTHER, folder_mode="on", selected_folders=["personal"])
    assert_nan(score_one(case(), cap, "scope_miss"), "undefined", "no_gold_supports")


# ---- attribution_hit -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("refs", "expected"),
    [
        ([ATLAS_DB_VERSION], 1.0),  # under the support
        ([ATLAS_DB], 1.0),
        ([{"rel_path": ".\\work\\atlas.md", "heading_path": "Atlas/Database"}], 1.0),  # normalised
        ([OTHER, BILLING], 1.0),  # any reference
        ([{"rel_path": "work/atlas.md", "heading_path": "Atlas"}], 0.0),  # above the support
        ([ATLAS_DBX], 0.0),
        ([], 0.0),
    ],
)
def test_attribution_hit(refs, expected):
    c = case(gold_supports=[ATLAS_DB, BILLING])
    # the retrieved chunks are irrelevant to attribution: only the answer's references count
    assert_ok(score_one(c, capture(ATLAS_DB, references=refs), "attribution_hit"), expected)


# ---- recency_rule_ok -------------------------------------------------------------------------

DATED = [dict(JAN, date="2025-01-10"), dict(APR, date="2025-04-02")]


def _sha(answer: str) -> str:
    return hashlib.sha256(answer.encode("utf-8")).hexdigest()[:16]


@pytest.mark.parametrize(
    ("refs", "expected"),
    [([APR], 1.0), ([JAN], 0.0), ([JAN, APR], 1.0), ([], 0.0), ([OTHER], 0.0)],
)
def test_recency_cite_newer(refs, expected):
    c = case(gold_supports=DATED, recency_conflict_rule="cite_newer")
    assert_ok(score_one(c, capture(JAN, APR, references=refs), "recency_rule_ok"), expected)


def test_recency_cite_newer_order_independent():
    # the newest support listed first
    c = case(gold_supports=list(reversed(DATED)), recency_conflict_rule="cite_newer")
    assert_ok(score_one(c, capture(references=[APR]), "recency_rule_ok"), 1.0)
    assert_ok(score_one(c, capture(references=[JAN]), "recency_rule_ok"), 0.0)


@pytest.mark.parametrize(
    ("refs", "expected"),
    [([JAN, APR], 1.0), ([APR, JAN, OTHER], 1.0), ([APR], 0.0), ([JAN], 0.0), ([], 0.0)],
)
def test_recency_cite_both(refs, expected):
    c = case(gold_supports=DATED, recency_conflict_rule="cite_both")
    assert_ok(score_one(c, capture(references=refs), "recency_rule_ok"), expected)


def test_recency_acknowledge_both_without_label_is_skipped():
    c = case(gold_supports=DATED, recency_conflict_rule="acknowledge_both")
    assert_nan(score_one(c, capture(references=[JAN, APR]), "recency_rule_ok"), "skipped", "no_judge")


@pytest.mark.parametrize("ack", [1, 0])
def test_recency_acknowledge_both_with_human_label(ack):
    labels = {"answers": [{"method": "m1", "answer_sha256": _sha(ANSWER), "acknowledges_conflict": ack}]}
    c = case(gold_supports=DATED, recency_conflict_rule="acknowledge_both", labels=labels)
    s = score_one(c, capture(references=[JAN, APR]), "recency_rule_ok")
    assert_ok(s, float(ack))
    assert s.source == "human"


def test_recency_acknowledge_both_needs_cite_both():
    labels = {"answers": [{"method": "m1", "acknowledges_conflict": 1}]}
    c = case(gold_supports=DATED, recency_conflict_rule="acknowledge_both", labels=labels)
    # acknowledges, but cites only the newer note → cite_both fails → 0
    assert_ok(score_one(c, capture(references=[APR]), "recency_rule_ok"), 0.0)


def test_recency_acknowledge_both_ignores_label_for_another_answer():
    labels = {"answers": [{"method": "m1", "answer_sha256": _sha("a different answer"), "acknowledges_conflict": 1}]}
    c = case(gold_supports=DATED, recency_conflict_rule="acknowledge_both", labels=labels)
    assert_nan(score_one(c, capture(references=[JAN, APR]), "recency_rule_ok"), "skipped", "no_judge")


def test_recency_no_rule_is_undefined():
    c = case(gold_supports=DATED)
    assert_nan(score_one(c, capture(references=[JAN, APR]), "recency_rule_ok"), "undefined", "no_recency_rule")
