"""The metric catalogue table for the docs, generated from the registry."""

from __future__ import annotations

from raglake.metrics.registry import all_metrics


def metrics_markdown() -> str:
    lines = [
        "# Metrics",
        "",
        "Generated from the registry by `raglake metrics --markdown > docs/metric-table.md`; a test keeps it in",
        "sync. The rules are those of METRICS.md; `version` changes whenever a rule changes a score.",
        "",
        "| metric | family | level | version | scale | better | applies to | seed | rule |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in all_metrics():
        better = {True: "higher", False: "lower", None: "–"}[m.higher_is_better]
        lines.append(
            f"| `{m.name}` | {m.family} | {m.level} | {m.version} | {m.scale} | {better} | "
            f"{m.applies_to} | {m.seed} | {m.description} |"
        )
    return "\n".join(lines)
