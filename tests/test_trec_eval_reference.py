"""raglake's retrieval metrics against trec_eval's own test data (METRICS.md §2).

The qrels and the run of usnistgov/trec_eval's `test/` folder (copied under
shared/metaeval/trec_eval_tests/) are replayed through raglake's public API as golden cases and
captures, and the scores must reproduce trec_eval's expected outputs to 4 decimals:

    trec_eval -m all_trec    qrels.test results.test  ->  out.test.a   (`all` rows)
    trec_eval -m all_trec -q qrels.test results.test  ->  out.test.aq  (one row per topic)

Mapping (one golden case per topic, one capture per topic):
- every qrels line with rel > 0 becomes a gold support: rel_path = docno, heading_path "" (no
  segments, so the anchor is the whole document), required False, no snippets -> grade 1, which
  is trec_eval's binary relevance and its gain 1 for rel = 1;
- every run line becomes a retrieved chunk: rel_path = docno, heading_path "", its score; ranks are
  assigned the way trec_eval ranks a run: by score descending, ties broken by docno descending
  (trec_eval ignores the rank column of the file).

trec_eval measure     raglake metric
P_5, P_10             precision_at_k, k = 5 / 10
recip_rank            mrr_at_k with k covering the whole run (k = the largest rank)
ndcg_cut_10           ndcg_at_k, k = 10 (grade-1 supports: gains 2^1 - 1 = 1 = trec_eval's gain)
success_1/5/10        recall_any_at_k, k = 1 / 5 / 10 (an extra check; same definition)

pytrec_eval (trec_eval's C code behind a Python API) scores the same qrels and run per topic as a
second, independent implementation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_batch, score_one

ROOT = Path(__file__).resolve().parents[1]
SHARED_TREC = ROOT.parent / "shared" / "metaeval" / "trec_eval_tests" / "test"
VENDORED_TREC = ROOT / "tests" / "data" / "trec_eval"  # the same files, so a clean clone runs this test
TREC_DIR = SHARED_TREC if (SHARED_TREC / "qrels.test").is_file() else VENDORED_TREC


def test_vendored_copy_is_identical_to_the_shared_files():
    for name in ("qrels.test", "results.test", "out.test.a", "out.test.aq"):
        assert (VENDORED_TREC / name).is_file()
        if (SHARED_TREC / name).is_file():
            assert (VENDORED_TREC / name).read_bytes() == (SHARED_TREC / name).read_bytes(), name


PLACES = 4  # trec_eval prints 4 decimals
TOL = 0.5 * 10**-PLACES + 1e-12

# trec_eval measure -> (raglake metric, k); k=None means "the whole run" (the largest rank)
MEASURES: dict[str, tuple[str, int | None]] = {
    "P_5": ("precision_at_k", 5),
    "P_10": ("precision_at_k", 10),
    "recip_rank": ("mrr_at_k", None),
    "ndcg_cut_10": ("ndcg_at_k", 10),
    "success_1": ("recall_any_at_k", 1),
    "success_5": ("recall_any_at_k", 5),
    "success_10": ("recall_any_at_k", 10),
}


# ---- reading trec_eval's files ---------------------------------------------------------------


@lru_cache(maxsize=None)
def read_qrels(path: Path = TREC_DIR / "qrels.test") -> dict[str, dict[str, int]]:
    """topic -> {docno: rel}, as trec_eval reads it: `topic iter docno rel`."""
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _iter, docno, rel = line.split()
            qrels[topic][docno] = int(rel)
    return dict(qrels)


@lru_cache(maxsize=None)
def read_run(path: Path = TREC_DIR / "results.test") -> dict[str, list[tuple[str, float]]]:
    """topic -> [(docno, score)] in trec_eval's order: score descending, ties by docno descending."""
    run: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            topic, _q0, docno, _rank, score, _runid = line.split()
            run[topic].append((docno, float(score)))
    # trec_eval sorts on (sim, docno) both descending (strcmp on docnos; all ASCII here)
    return {t: sorted(docs, key=lambda ds: (ds[1], ds[0]), reverse=True) for t, docs in run.items()}


@lru_cache(maxsize=None)
def read_trec_eval_output(name: str) -> dict[tuple[str, str], float]:
    """(measure, topic or 'all') -> value from one of trec_eval's expected output files."""
    out: dict[tuple[str, str], float] = {}
    for line in (TREC_DIR / name).read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            try:
                out[(parts[0], parts[1])] = float(parts[2])
            except ValueError:  # runid
                pass
    return out


# ---- replaying them through raglake -----------------------------------------------------------


def golden_case(topic: str, judgements: dict[str, int]) -> GoldenCase:
    return GoldenCase.model_validate(
        {
            "id": topic,
            "question": f"TREC topic {topic}",
            "gold_supports": [
                {"rel_path": docno, "heading_path": "", "required": False}
                for docno, rel in sorted(judgements.items())
                if rel > 0
            ],
        }
    )


def capture(topic: str, ranked: list[tuple[str, float]]) -> Capture:
    return Capture.model_validate(
        {
            "case_id": topic,
            "answer": f"replayed from results.test, topic {topic}",
            "retrieved": [
                {"rank": rank, "rel_path": docno, "heading_path": "", "score": score}
                for rank, (docno, score) in enumerate(ranked, start=1)
            ],
        }
    )


@lru_cache(maxsize=None)
def pairs() -> dict[str, tuple[GoldenCase, Capture]]:
    """topic -> (case, capture) for every topic trec_eval evaluates: present in qrels and run."""
    qrels, run = read_qrels(), read_run()
    return {t: (golden_case(t, qrels[t]), capture(t, run[t])) for t in sorted(set(qrels) & set(run))}


def k_for(measure: str) -> int:
    metric, k = MEASURES[measure]
    return k if k is not None else max(len(cap.retrieved) for _, cap in pairs().values())


@lru_cache(maxsize=None)
def raglake_scores(measure: str) -> dict[str, tuple[float, str, str | None]]:
    """topic -> (value, status, reason) of `measure`'s raglake metric, through score_batch."""
    metric, _ = MEASURES[measure]
    batch = score_batch(pairs().values(), [get_metric(metric)], ScoringConfig(k=k_for(measure)))
    s = batch.scores
    return {
        cid: (value, status, reason)
        for cid, name, value, status, reason in zip(s["case_id"], s["metric"], s["value"], s["status"], s["reason"])
        if name == metric
    }


def trec_eval_mean(per_topic: dict[str, tuple[float, str, str | None]], qrels: dict[str, dict[str, int]]) -> float:
    """The `all` value trec_eval prints: the plain mean over the topics it evaluated.

    trec_eval (without -c) evaluates exactly the topics that appear in BOTH the qrels and the run:
    run topics with no qrels lines at all are ignored completely, and qrels topics the run never
    answered are left out (only -c would count them as 0). A topic that IS in the qrels but has no
    relevant document (every judgement rel <= 0) is still evaluated and counted in num_q, with 0 for
    P, recip_rank and ndcg_cut (its ideal DCG is 0 and trec_eval writes 0, not NaN). raglake instead
    marks such a case `undefined` (reason no_gold_supports / idcg_zero) and leaves it out of its own
    dataset means, so to reproduce trec_eval's average such a topic is counted here as 0. (All three
    topics of qrels.test have relevant documents, so for this data both conventions give the same
    number; test_topic_without_relevant_docs pins the convention down.)
    """
    values = []
    for topic, (value, status, reason) in per_topic.items():
        if status == "ok":
            values.append(value)
        else:
            assert not any(rel > 0 for rel in qrels[topic].values()), (topic, status, reason)
            values.append(0.0)
    return sum(values) / len(values)


# ---- the data itself -------------------------------------------------------------------------


def test_replay_is_faithful():
    qrels, run = read_qrels(), read_run()
    expected = read_trec_eval_output("out.test.aq")
    assert set(pairs()) == {"301", "302", "303"}
    for topic, (case, cap) in pairs().items():
        assert len(case.gold_supports) == expected[("num_rel", topic)] == sum(r > 0 for r in qrels[topic].values())
        assert len(cap.retrieved) == expected[("num_ret", topic)] == len(run[topic])
        assert [c.rank for c in cap.retrieved] == list(range(1, len(cap.retrieved) + 1))
        scores = [c.score for c in cap.retrieved]
        assert scores == sorted(scores, reverse=True)
        # docnos survive rel_path normalisation unchanged, and a ranking holds no duplicate docno
        assert [c.rel_path for c in cap.retrieved] == [d for d, _ in run[topic]]
        assert len({c.rel_path for c in cap.retrieved}) == len(cap.retrieved)
        gold = {s.rel_path for s in case.gold_supports}
        num_rel_ret = sum(c.rel_path in gold for c in cap.retrieved)
        assert num_rel_ret == expected[("num_rel_ret", topic)]
    assert read_trec_eval_output("out.test.a")[("num_q", "all")] == len(pairs())


def test_ties_are_broken_by_docno_descending():
    # results.test has equal scores within a topic; the replay must order them as trec_eval does
    ties = 0
    for topic, ranked in read_run().items():
        for (d1, s1), (d2, s2) in zip(ranked, ranked[1:]):
            if s1 == s2:
                ties += 1
                assert d1 > d2, (topic, d1, d2)
    assert ties > 0


# ---- per topic and `all` against trec_eval ---------------------------------------------------

TOPICS = ("301", "302", "303")


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("measure", list(MEASURES))
def test_per_topic_matches_trec_eval(measure: str, topic: str):
    expected = read_trec_eval_output("out.test.aq")[(measure, topic)]
    value, status, reason = raglake_scores(measure)[topic]
    assert status == "ok", reason
    assert round(value, PLACES) == pytest.approx(expected, abs=1e-12), (measure, topic, value, expected)


@pytest.mark.parametrize("measure", list(MEASURES))
def test_all_matches_trec_eval(measure: str):
    expected_all = read_trec_eval_output("out.test.a")[(measure, "all")]
    # -q's trailing `all` block repeats the same numbers
    assert read_trec_eval_output("out.test.aq")[(measure, "all")] == expected_all
    mean = trec_eval_mean(raglake_scores(measure), read_qrels())
    assert abs(mean - expected_all) <= TOL, (measure, mean, expected_all)


@pytest.mark.parametrize("topic", TOPICS)
def test_score_one_agrees_with_score_batch(topic: str):
    case, cap = pairs()[topic]
    for measure, (metric, _) in MEASURES.items():
        one = score_one(case, cap, metric, k=k_for(measure))
        assert one.status == "ok"
        assert one.value == raglake_scores(measure)[topic][0], (measure, topic)


def test_recip_rank_needs_the_whole_run():
    # topic 303's first relevant document sits at rank 19: a cutoff below that gives 0, not 1/19
    case, cap = pairs()["303"]
    assert score_one(case, cap, "mrr_at_k", k=18).value == 0.0
    assert score_one(case, cap, "mrr_at_k", k=19).value == pytest.approx(1 / 19)
    assert round(1 / 19, PLACES) == read_trec_eval_output("out.test.aq")[("recip_rank", "303")]


# ---- pytrec_eval on the same qrels and run ---------------------------------------------------

try:
    import pytrec_eval
except ImportError:  # pragma: no cover - a dev dependency
    pytrec_eval = None

needs_pytrec_eval = pytest.mark.skipif(pytrec_eval is None, reason="pytrec_eval (pytrec-eval-terrier) not installed")


@lru_cache(maxsize=None)
def pytrec_eval_scores() -> dict[str, dict[str, float]]:
    qrels = read_qrels()
    run = {t: dict(docs) for t, docs in read_run().items()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"P_5", "P_10", "recip_rank", "ndcg_cut_10", "success_1,5,10"})
    return evaluator.evaluate(run)


@needs_pytrec_eval
def test_pytrec_eval_reproduces_trec_eval():
    # the second implementation must itself agree with trec_eval's files, else the comparison means nothing
    expected = read_trec_eval_output("out.test.aq")
    got = pytrec_eval_scores()
    assert set(got) == set(TOPICS)
    for topic in TOPICS:
        for measure in ("P_5", "P_10", "recip_rank", "ndcg_cut_10"):
            assert round(got[topic][measure], PLACES) == pytest.approx(expected[(measure, topic)], abs=1e-12)


@needs_pytrec_eval
@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("measure", ["P_5", "P_10", "recip_rank", "ndcg_cut_10", "success_10"])
def test_per_topic_matches_pytrec_eval(measure: str, topic: str):
    value, status, _ = raglake_scores(measure)[topic]
    assert status == "ok"
    assert value == pytest.approx(pytrec_eval_scores()[topic][measure], abs=1e-12), (measure, topic)


@needs_pytrec_eval
def test_topic_without_relevant_docs():
    """A judged topic with no relevant document: trec_eval/pytrec_eval evaluate it as 0 and count it in
    the average; raglake's case has no gold supports, so its retrieval metrics are `undefined`."""
    qrels = {"301": read_qrels()["301"], "900": {"X-1": 0, "X-2": 0}}
    run = {"301": dict(read_run()["301"]), "900": {"X-1": 2.0, "X-3": 1.0}, "901": {"Y-1": 1.0}}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"P_5", "recip_rank", "ndcg_cut_10"}).evaluate(run)
    assert set(ref) == {"301", "900"}  # 901 has no qrels: ignored, as trec_eval does
    assert ref["900"] == {"P_5": 0.0, "recip_rank": 0.0, "ndcg_cut_10": 0.0}

    case = golden_case("900", qrels["900"])
    cap = capture("900", sorted(run["900"].items(), key=lambda ds: (ds[1], ds[0]), reverse=True))
    assert case.gold_supports == []
    pair_301 = pairs()["301"]
    for measure, ref_name in (("P_5", "P_5"), ("recip_rank", "recip_rank"), ("ndcg_cut_10", "ndcg_cut_10")):
        metric, _ = MEASURES[measure]
        k = k_for(measure)
        s900 = score_one(case, cap, metric, k=k)
        assert s900.status == "undefined" and math.isnan(s900.value)
        s301 = score_one(*pair_301, metric, k=k)
        per_topic = {"301": (s301.value, s301.status, s301.reason), "900": (s900.value, s900.status, s900.reason)}
        # trec_eval's `all` over {301, 900} = the mean of pytrec_eval's per-topic values
        assert trec_eval_mean(per_topic, qrels) == pytest.approx((ref["301"][ref_name] + ref["900"][ref_name]) / 2)


@needs_pytrec_eval
def test_tie_order_matches_trec_eval_code():
    """Equal scores: trec_eval (here through pytrec_eval) ranks them by docno descending; so must the replay."""
    qrels = {"t": {"DOC-A": 1, "DOC-B": 0}}
    run = {"t": {"DOC-A": 1.0, "DOC-B": 1.0, "DOC-C": 1.0}}
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut_10"}).evaluate(run)["t"]
    assert ref["recip_rank"] == pytest.approx(1 / 3)  # C, B, A
    case = golden_case("t", qrels["t"])
    cap = capture("t", sorted(run["t"].items(), key=lambda ds: (ds[1], ds[0]), reverse=True))
    assert [c.rel_path for c in cap.retrieved] == ["DOC-C", "DOC-B", "DOC-A"]
    assert score_one(case, cap, "mrr_at_k", k=3).value == pytest.approx(ref["recip_rank"])
    assert score_one(case, cap, "ndcg_at_k", k=10).value == pytest.approx(ref["ndcg_cut_10"])
