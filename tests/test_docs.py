"""The docs read the registry: the metrics table is generated, and kept in sync by this test."""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

from raglake.docs import metrics_markdown
from raglake.metrics.registry import all_metrics
from tests.conftest import ROOT

_NOT_SOURCE = {"__pycache__", "build", "dist"}


def test_docs_metrics_table_is_generated_from_the_registry() -> None:
    text = (ROOT / "docs" / "metric-table.md").read_text()
    assert text.strip() == metrics_markdown().strip(), "run: raglake metrics --markdown > docs/metric-table.md"
    for metric in all_metrics():
        assert f"| `{metric.name}` |" in text


def test_no_two_files_differ_only_by_case() -> None:
    """docs/METRICS.md (the catalogue) and a generated docs/metrics.md were one file on macOS and Windows."""
    folded = defaultdict(set)
    for folder, dirs, files in os.walk(ROOT):
        here = Path(folder).relative_to(ROOT)
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _NOT_SOURCE
            and not d.endswith(".egg-info")
            and (here / d).as_posix() != "data/lake"
        ]
        for name in dirs + files:
            folded[(here / name).as_posix().lower()].add((here / name).as_posix())
    assert not [names for names in folded.values() if len(names) > 1]
