"""Which metrics a table shows first comes from the registry's metadata (Metric.headline,
Metric.worst_cases), never from a list of metric names kept by the CLI or the report."""

from __future__ import annotations

from raglake.cli.common import headline_metrics
from raglake.metrics.registry import all_metrics
from raglake.report.data import registry_order


def _rows(**n: int) -> list[dict]:
    return [{"metric": name, "n": count} for name, count in n.items()]


def test_the_cli_shows_the_headline_metrics_with_values_in_registry_order() -> None:
    rows = _rows(groundedness=4, mrr_at_k=3, recall_all_at_k=3, recall_any_at_k=3, ndcg_at_k=0)
    assert headline_metrics(rows, []) == ["recall_any_at_k", "mrr_at_k", "groundedness"]
    assert headline_metrics(rows, ["recall_all_at_k"]) == ["recall_all_at_k"]  # chosen ones win
    assert headline_metrics(_rows(recall_all_at_k=2, precision_at_k=2), []) == ["recall_all_at_k", "precision_at_k"]


def test_headline_and_worst_case_flags_are_set_where_metrics_are_registered() -> None:
    metrics = all_metrics(level="case")
    assert {m.family for m in metrics if m.headline} >= {"retrieval", "abstention", "embedding", "judge"}
    run_level = {m.name for m in all_metrics(level="run") if m.headline}
    assert run_level >= {"error_rate", "latency_p95_ms", "judge_cost_usd"}
    assert all(m.level == "case" for m in all_metrics() if m.worst_cases)
    assert all(m.headline for m in metrics if m.worst_cases)  # a metric listed by worst case is charted too


def test_rows_are_ordered_as_the_registry_registers_metrics() -> None:
    rows = _rows(groundedness=1, not_a_metric=1, recall_any_at_k=1, abstention_accuracy=1)
    assert [r["metric"] for r in registry_order(rows)] == [
        "recall_any_at_k",
        "abstention_accuracy",
        "groundedness",
        "not_a_metric",
    ]
