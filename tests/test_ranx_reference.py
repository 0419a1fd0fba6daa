"""raglake's graded retrieval metrics against ranx (METRICS.md §2).

Random synthetic queries (seeded numpy) are scored both ways:
- raglake: golden cases whose gold supports are grade 2 (`required=True`) or grade 1 (otherwise),
  captures ranking distinct documents, through the per-case path (tests/rowpath.py score_batch);
- ranx: qrels {doc: grade} and run {doc: score} built from the same draw.

ndcg_at_k must equal ranx's `ndcg_burges@K` (exponential gains 2^g - 1, discount log2(rank + 1),
ideal DCG from the qrels' K best grades), precision_at_k ranx's `precision@K` (denominator K even
when fewer than K documents came back), mrr_at_k ranx's `mrr@K` (reciprocal rank cut at K) and
recall_any_at_k ranx's `hit_rate@K`, per query, to 1e-9.

Every ranking holds distinct documents and every chunk's anchor equals its document's support
anchor exactly (or matches no support), so raglake's anchor-prefix matching and its "a support is
credited once" rule coincide with ranx's docno equality.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pytest

from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_batch

ranx = pytest.importorskip("ranx")

SEED = 20240601
N_QUERIES = 48
POOL = 30  # documents a query's supports and chunks are drawn from
KS = (1, 3, 5, 10, 20)
TOL = 1e-9

# raglake metric -> ranx metric (without the @K)
PAIRS = {
    "ndcg_at_k": "ndcg_burges",
    "precision_at_k": "precision",
    "mrr_at_k": "mrr",
    "recall_any_at_k": "hit_rate",
}


def _anchor(q: int, d: int) -> tuple[str, str]:
    """(rel_path, heading_path) of document d of query q; distinct rel_paths, so no cross matches."""
    return f"vault/q{q:02d}/doc-{d:02d}.md", f"Doc {d} > Section {d % 4}"


@lru_cache(maxsize=None)
def synthetic(grade2_via: str = "required"):
    """(cases, captures, qrels, run) for N_QUERIES random queries.

    Each query: 1-6 gold supports among POOL documents, each grade 2 with probability 0.4 (marked
    `required`, or by a snippet when grade2_via='snippets'); a ranking of 1-25 distinct documents
    (some queries return fewer than K) with strictly decreasing scores, drawn so that relevant
    documents turn up at varied ranks.
    """
    rng = np.random.default_rng(SEED)
    cases, captures = [], []
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(N_QUERIES):
        qid = f"q{q:02d}"
        n_sup = int(rng.integers(1, 7))
        sup_docs = rng.choice(POOL, size=n_sup, replace=False)
        grades = np.where(rng.random(n_sup) < 0.4, 2, 1)
        supports = []
        for d, g in zip(sup_docs, grades):
            rel_path, heading = _anchor(q, int(d))
            sup = {"rel_path": rel_path, "heading_path": heading, "required": False}
            if g == 2:
                if grade2_via == "required":
                    sup["required"] = True
                else:
                    sup["snippets"] = [f"fact {d}"]
            supports.append(sup)
        qrels[qid] = {_anchor(q, int(d))[0]: int(g) for d, g in zip(sup_docs, grades)}

        n_ret = int(rng.integers(1, 26))
        # favour relevant documents a little so hits land at every depth
        weights = np.ones(POOL)
        weights[sup_docs] = 3.0
        ranked = rng.choice(POOL, size=n_ret, replace=False, p=weights / weights.sum())
        scores = np.sort(rng.random(n_ret))[::-1] + np.arange(n_ret, 0, -1)  # strictly decreasing
        retrieved = []
        for rank, (d, s) in enumerate(zip(ranked, scores), start=1):
            rel_path, heading = _anchor(q, int(d))
            retrieved.append(
                {
                    "rank": rank,
                    "rel_path": rel_path,
                    "heading_path": heading,
                    "text": f"fact {d} and more",
                    "score": float(s),
                }
            )
        run[qid] = {_anchor(q, int(d))[0]: float(s) for d, s in zip(ranked, scores)}

        cases.append(GoldenCase.model_validate({"id": qid, "question": f"question {q}", "gold_supports": supports}))
        captures.append(Capture.model_validate({"case_id": qid, "answer": "an answer", "retrieved": retrieved}))
    return cases, captures, qrels, run


@lru_cache(maxsize=None)
def raglake_values(k: int, grade2_via: str = "required") -> dict[tuple[str, str], float]:
    cases, captures, _, _ = synthetic(grade2_via)
    metrics = [get_metric(name) for name in PAIRS]
    s = score_batch(zip(cases, captures), metrics, ScoringConfig(k=k)).scores
    out = {}
    for cid, name, value, status, reason in zip(s["case_id"], s["metric"], s["value"], s["status"], s["reason"]):
        assert status == "ok", (cid, name, reason)
        out[(name, cid)] = value
    return out


def ranx_evaluate(qrels: dict, run: dict, names: list[str]) -> dict[str, dict[str, float]]:
    """ranx per-query scores: {metric: {qid: value}}.

    Plain dicts go straight to ranx's typed-list conversion, which avoids the long numba compile of
    ranx.Qrels/Run.from_dict (seconds -> about one second for the first call). Scores come back as
    arrays in the dicts' query order, so both dicts must list the queries in the same order.
    """
    assert list(qrels) == list(run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter on first compile
        # (ranx's evaluate fails on a single metric with return_mean=False, so always ask for several)
        arrays = ranx.evaluate(qrels, run, [*names, "hit_rate@1"], return_mean=False)
    return {name: dict(zip(run, map(float, arrays[name]))) for name in names}


@lru_cache(maxsize=None)
def ranx_values(k: int, grade2_via: str = "required") -> dict[tuple[str, str], float]:
    _, _, qrels, run = synthetic(grade2_via)
    scores = ranx_evaluate(qrels, run, [f"{m}@{k}" for m in PAIRS.values()])
    return {(ours, qid): scores[f"{theirs}@{k}"][qid] for ours, theirs in PAIRS.items() for qid in run}


def test_synthetic_data_covers_the_interesting_cases():
    cases, captures, qrels, run = synthetic()
    grades = [g for q in qrels.values() for g in q.values()]
    assert {1, 2} <= set(grades)
    assert any(len(c.retrieved) < 10 for c in captures)  # short rankings: denominators stay K
    assert any(len(c.retrieved) > 20 for c in captures)
    for c in captures:
        docs = [x.rel_path for x in c.retrieved]
        assert len(set(docs)) == len(docs)
    hits_at = [
        rank
        for cap, case in zip(captures, cases)
        for rank, ch in enumerate(cap.retrieved, start=1)
        if ch.rel_path in qrels[case.id]
    ]
    assert min(hits_at) == 1 and max(hits_at) > 10
    # some queries get a grade-2 support retrieved below a grade-1 one (ideal order differs from run order)
    assert any(
        [qrels[case.id][ch.rel_path] for ch in cap.retrieved if ch.rel_path in qrels[case.id]]
        != sorted([qrels[case.id][ch.rel_path] for ch in cap.retrieved if ch.rel_path in qrels[case.id]], reverse=True)
        for cap, case in zip(captures, cases)
    )


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("metric", list(PAIRS))
def test_matches_ranx_per_query(metric: str, k: int):
    ours, theirs = raglake_values(k), ranx_values(k)
    bad = {
        qid: (ours[(metric, qid)], theirs[(metric, qid)])
        for (name, qid) in ours
        if name == metric and abs(ours[(metric, qid)] - theirs[(metric, qid)]) > TOL
    }
    assert not bad, f"{metric}@{k} differs from ranx {PAIRS[metric]}@{k} on {len(bad)} queries: {bad}"


@pytest.mark.parametrize("k", (3, 10))
def test_snippet_supports_are_grade_2_too(k: int):
    # METRICS.md §2: a support is grade 2 when required OR when it lists snippets
    ours, theirs = raglake_values(k, "snippets"), ranx_values(k, "snippets")
    for (name, qid), value in ours.items():
        if name == "ndcg_at_k":
            assert value == pytest.approx(theirs[(name, qid)], abs=TOL), qid


def test_exponential_gains_differ_from_linear():
    # guard that the comparison is sensitive to the gain function: ranx's linear-gain ndcg differs somewhere
    _, _, qrels, run = synthetic()
    linear = ranx_evaluate(qrels, run, ["ndcg@10", "ndcg_burges@10"])["ndcg@10"]
    ours = raglake_values(10)
    assert any(abs(linear[qid] - ours[("ndcg_at_k", qid)]) > 1e-6 for qid in run)
