"""The metric catalogue table for the docs, generated from the registry."""

from __future__ import annotations

from raglake.metrics.registry import all_metrics


def metrics_markdown() -> str:
    lines = [
        "| metric | family | level | version | scale | better | applies to | seed | rule |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for m in all_metrics():
        better = {True: "higher", False: "lower", None: "–"}[m.higher_is_better]
        lines.append(f"| `{m.name}` | {m.family} | {m.level} | {m.version} | {m.scale} | {better} | "
                     f"{m.applies_to} | {m.seed} | {m.description} |")
    return "\n".join(lines)
