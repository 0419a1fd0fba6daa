"""The sample's two replayed retrieval methods (data/captures: basic_search as A, local_search as B) landed
in a test lake without Prefect (tests/lakekit.land), with a second run of A on the same captures (nothing
changes): the comparisons a newcomer sees first. On the sample, B is worse on answer_relevance_emb (the
one regression, a metric the registry does not flag for worst cases), better on mrr_at_k, and its
recency_rule_ok difference has 9 pairs and a wide interval."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from raglake.metrics.registry import all_metrics
from tests.conftest import ROOT
from tests.lakekit import land

GOLDEN = str(ROOT / "data" / "golden" / "sample.jsonl")
BASIC = f"replay:{ROOT / 'data' / 'captures' / 'basic_search.jsonl'}"
LOCAL = f"replay:{ROOT / 'data' / 'captures' / 'local_search.jsonl'}"
METRICS = [
    "recall_any_at_k",
    "mrr_at_k",
    "recency_rule_ok",
    "abstention_accuracy",
    "answer_relevance_emb",
    "answer_correctness_emb",
    "semantic_similarity",
    *(m.name for m in all_metrics(level="case", family="label")),
]


@dataclass(frozen=True)
class SamplePair:
    lake: str
    a: str  # basic_search
    b: str  # local_search
    a_again: str  # basic_search again, on the same captures: no difference at all


def land_sample_pair(folder: Path) -> SamplePair:
    lake = str(folder / "lake")
    a = land(lake, GOLDEN, BASIC, "r-basic", minutes=0, metrics=METRICS)
    b = land(lake, GOLDEN, LOCAL, "r-local", minutes=1, metrics=METRICS)
    again = land(lake, GOLDEN, BASIC, "r-basic-again", minutes=2, metrics=METRICS)
    return SamplePair(lake, a, b, again)
