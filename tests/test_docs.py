"""The docs read the registry: the metrics table is generated, and kept in sync by this test."""

from __future__ import annotations

from raglake.docs import metrics_markdown
from raglake.metrics.registry import all_metrics
from tests.conftest import ROOT


def test_docs_metrics_table_is_generated_from_the_registry() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    assert text.strip() == metrics_markdown().strip(), "run: raglake metrics --markdown > docs/metrics.md"
    for metric in all_metrics():
        assert f"| `{metric.name}` |" in text
