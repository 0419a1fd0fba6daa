"""Property tests (Hypothesis) of the retrieval metrics on random rankings."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric
from raglake.schemas import Capture, GoldenCase
from raglake.scoring import score_context

SETTINGS = settings(max_examples=100, deadline=None)
RANK_METRICS = ("recall_any_at_k", "recall_all_at_k", "precision_at_k", "mrr_at_k", "ndcg_at_k")


# ---- strategies ------------------------------------------------------------------------------
# Support i lives in its own file doc{i}.md under heading 'H{i}', so a chunk matches at most one
# support, and we know by construction which chunks match ('hit') and which do not ('miss').


@st.composite
def supports(draw):
    n = draw(st.integers(1, 4))
    out = []
    for i in range(n):
        s = {"rel_path": f"doc{i}.md", "heading_path": f"H{i}"}
        if draw(st.booleans()):
            s["required"] = True
        if draw(st.booleans()):
            s["snippets"] = ["needle"]
        out.append(s)
    groups = draw(st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True), max_size=3))
    return out, groups


def hit_chunk(i: int, sub: int) -> dict:
    heading = f"H{i}" if sub == 0 else f"H{i} > Sub {sub}"
    return {"rel_path": f"doc{i}.md", "heading_path": heading, "text": "a needle in a haystack", "hit": i}


def miss_chunk(j: int, kind: int) -> dict:
    if kind == 0:  # another note
        return {"rel_path": f"noise{j}.md", "heading_path": f"N{j}", "text": "noise", "hit": None}
    # the right file, a heading that is a string prefix but not a segment prefix
    return {"rel_path": f"doc{j % 4}.md", "heading_path": f"H{j % 4}x", "text": "noise", "hit": None}


chunk = st.one_of(
    st.builds(hit_chunk, st.integers(0, 3), st.integers(0, 2)),
    st.builds(miss_chunk, st.integers(0, 9), st.integers(0, 1)),
)


@st.composite
def scenarios(draw):
    sups, groups = draw(supports())
    n = len(sups)
    chunks = [c for c in draw(st.lists(chunk, max_size=8)) if c["hit"] is None or c["hit"] < n]
    ranks = sorted(draw(st.lists(st.integers(1, 12), min_size=len(chunks), max_size=len(chunks), unique=True)))
    k = draw(st.integers(1, 6))
    return sups, groups, list(zip(ranks, chunks)), k


def build(sups, groups, ranked, k=5):
    case = GoldenCase.model_validate(
        {"id": "p", "question": "q?", "gold_supports": sups, "required_support_groups": groups}
    )
    capture = Capture.model_validate({
        "case_id": "p", "answer": "an answer",
        "retrieved": [
            {"rank": r, "rel_path": c["rel_path"], "heading_path": c["heading_path"], "text": c["text"]}
            for r, c in ranked
        ],
    })
    return CaseContext(case, capture, ScoringConfig(k=k))


def scores(ctx, names=RANK_METRICS):
    return {m.name: s for m, s in score_context(ctx, [get_metric(n) for n in names])}


def _grade(s: dict) -> int:
    return 2 if s.get("required") or s.get("snippets") else 1


# ---- properties ------------------------------------------------------------------------------


@SETTINGS
@given(scenarios(), st.booleans())
def test_all_scores_in_range(scenario, require_snippets):
    sups, groups, ranked, k = scenario
    base = build(sups, groups, ranked, k)
    ctx = CaseContext(base.case, base.capture, ScoringConfig(k=k, require_snippets=require_snippets))
    # embedding and judge metrics need vectors / judge outcomes: their own tests cover them
    for metric, s in score_context(ctx, [m for m in all_metrics(level="case") if m.family not in ("embedding", "judge")]):
        if s.status == "ok":
            assert math.isfinite(s.value)
            assert 0.0 <= s.value <= 1.0 + 1e-12, (metric.name, s)
            if metric.scale == "binary":
                assert s.value in (0.0, 1.0), (metric.name, s)
        else:
            assert math.isnan(s.value) and s.reason, (metric.name, s)
    got = scores(base)
    for name in ("recall_any_at_k", "precision_at_k", "mrr_at_k", "ndcg_at_k"):
        assert got[name].status == "ok", (name, got[name])


@SETTINGS
@given(supports(), st.lists(st.builds(miss_chunk, st.integers(0, 9), st.just(0)), max_size=4),
       st.integers(1, 6), st.lists(st.integers(0, 2), min_size=4, max_size=4))
def test_ideal_ranking_gives_ndcg_one(sup_groups, tail, k, subs):
    sups, groups = sup_groups
    order = sorted(range(len(sups)), key=lambda i: -_grade(sups[i]))  # grade order, 2s first
    chunks = [hit_chunk(i, subs[i]) for i in order] + tail
    s = scores(build(sups, groups, list(enumerate(chunks, start=1)), k))["ndcg_at_k"]
    assert s.status == "ok"
    assert math.isclose(s.value, 1.0, rel_tol=1e-9)


@SETTINGS
@given(scenarios(), st.data())
def test_shuffling_non_matching_chunks_changes_nothing(scenario, data):
    sups, groups, ranked, k = scenario
    miss_positions = [p for p, (_, c) in enumerate(ranked) if c["hit"] is None]
    perm = data.draw(st.permutations(miss_positions))
    shuffled = list(ranked)
    for dst, src in zip(miss_positions, perm):
        shuffled[dst] = (ranked[dst][0], ranked[src][1])  # same ranks, other non-matching chunk
    before = scores(build(sups, groups, ranked, k))
    after = scores(build(sups, groups, shuffled, k))
    for name in RANK_METRICS:
        a, b = before[name], after[name]
        assert a.status == b.status
        assert (math.isnan(a.value) and math.isnan(b.value)) or math.isclose(a.value, b.value, abs_tol=1e-12), name


@SETTINGS
@given(scenarios())
def test_precision_times_k_counts_matching_top_k(scenario):
    sups, groups, ranked, k = scenario
    expected = sum(1 for r, c in ranked if r <= k and c["hit"] is not None)
    s = scores(build(sups, groups, ranked, k))["precision_at_k"]
    assert s.status == "ok"
    assert math.isclose(s.value * k, expected, abs_tol=1e-9)


@SETTINGS
@given(scenarios())
def test_recall_any_iff_mrr_positive(scenario):
    sups, groups, ranked, k = scenario
    got = scores(build(sups, groups, ranked, k))
    recall, mrr = got["recall_any_at_k"].value, got["mrr_at_k"].value
    assert (recall == 1.0) == (mrr > 0)
    # and both agree with the construction
    first = min((r for r, c in ranked if r <= k and c["hit"] is not None), default=None)
    assert recall == (1.0 if first else 0.0)
    assert math.isclose(mrr, 1 / first if first else 0.0)


@SETTINGS
@given(scenarios())
def test_recall_all_matches_construction(scenario):
    sups, groups, ranked, k = scenario
    s = scores(build(sups, groups, ranked, k))["recall_all_at_k"]
    if not groups:
        assert s.status == "undefined" and math.isnan(s.value)
        return
    hit = {c["hit"] for r, c in ranked if r <= k and c["hit"] is not None}
    assert s.value == float(all(any(i in hit for i in g) for g in groups))
