"""The Python API's tables read well when printed (issue 27, finding 5): `Result.summary()` is the metrics
with values, metric first (`all=True`: every metric and column); `compare()` has a verdict, q and, for
"no clear change", a short why, in a compact set of columns (`full=True`: every column of compare_runs)."""

from __future__ import annotations

import pytest

from raglake.api.result import Result
from raglake.pipeline.lakes import open_lake
from tests.samplepair import SamplePair, land_sample_pair


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> SamplePair:
    return land_sample_pair(tmp_path_factory.mktemp("api_pair"))


def test_summary_shows_the_metrics_with_values_metric_first(pair):
    result = Result.of(pair.b, pair.lake)
    summary = result.summary()
    assert list(summary.columns)[0] == "metric"
    assert "run_id" not in summary.columns and "target_name" not in summary.columns
    assert (summary["n"] > 0).all()
    assert "semantic_similarity" not in set(summary["metric"])  # the same figure as answer_correctness_emb
    assert {"mean", "ci_low", "ci_high"} <= set(summary.columns)
    everything = result.summary(all=True)
    assert list(everything.columns)[0] == "metric" and "run_id" in everything.columns
    assert "semantic_similarity" in set(everything["metric"])
    assert len(everything) > len(summary)
    by_category = result.summary(by="category")
    assert list(by_category.columns)[:2] == ["metric", "slice"]


def test_compare_has_a_verdict_q_and_why_in_a_compact_frame(pair):
    b, a = Result.of(pair.b, pair.lake), Result.of(pair.a, pair.lake)
    frame = b.compare(a)
    assert {"metric", "verdict", "q", "why", "ci_low", "ci_high", "diff"} <= set(frame.columns)
    assert len(frame.columns) <= 12
    verdicts = dict(zip(frame["metric"], frame["verdict"]))
    assert verdicts["answer_relevance_emb"] == "worse" and verdicts["mrr_at_k"] == "better"
    assert "semantic_similarity" not in verdicts
    unclear = frame[frame["verdict"] == "no clear change"]
    assert len(unclear) and unclear["why"].notna().all() and (unclear["why"].str.len() > 0).all()
    why = dict(zip(frame["metric"], frame["why"]))
    # recency_rule_ok: its own interval excludes 0 (9 pairs) but the FDR control does not keep it
    assert "q" in why["recency_rule_ok"] and "FDR" in why["recency_rule_ok"]
    assert why["recall_any_at_k"] == "the 95% CI spans 0"
    assert frame[frame["verdict"] != "no clear change"]["why"].isna().all()
    full = b.compare(a, full=True)
    assert {"fdr_low", "fdr_high", "q_value", "p_value", "tested", "verdict", "why"} <= set(full.columns)
    assert len(full.columns) > len(frame.columns) and "semantic_similarity" in set(full["metric"])


def test_the_why_of_rows_that_are_not_tested(pair):
    rows = open_lake(pair.lake).compare(pair.a, pair.b, min_pairs=10)
    few = [r for r in rows if r["n_pairs"] < 10 and r["metric"] == "recency_rule_ok" and r["dimension"] == "all"]
    assert few and few[0]["why"] == "too few pairs (9, fewer than 10)"
    same = [r for r in open_lake(pair.lake).compare(pair.a, pair.a_again) if r["dimension"] == "all"]
    assert {r["why"] for r in same} == {"no case changed"}
