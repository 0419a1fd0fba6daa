"""Run-level operational and latency figures (METRICS.md §6, seed 001) that captures provide."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raglake.metrics.registry import RunValue, register
from raglake.schemas import LATENCY_STAGES, Capture


@dataclass(frozen=True)
class RunInputs:
    captures: Sequence[Capture]
    suite_seconds: float | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)  # raglake's own stages: inputs, capture, scoring…
    manifest: Any = None  # the target's index manifest (raglake.builtin.index.IndexManifest), when it has one
    embedding_stats: dict[str, float] | None = None  # the run's embedding stage: distinct texts, encoded, seconds
    judge_stats: dict[str, Any] | None = None  # calls, ledger_hits, tokens, cost_usd, spot_pairs
    captures_reused: int | None = None  # cases whose captures an earlier run made (see captures_reused)


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default, as Excel's PERCENTILE.INC)."""
    return float(np.percentile(np.asarray(values, dtype=float), q))


def _latencies(run: RunInputs, q: int, name: str) -> list[RunValue]:
    """The target's own stage timings over successful captures; the measured wall time over every call
    (a timeout is a real wait); the judge's calls per prompt (stage `judge:<prompt>`, and
    `spot_check:<prompt>` for the second judge), as the judge stage measured them."""
    out = []
    for stage in LATENCY_STAGES:
        values = [getattr(c.latency_ms, stage) for c in run.captures if stage == "wall" or not c.failed]
        values = [v for v in values if v is not None]
        if values:
            out.append(RunValue(name, percentile(values, q), stage, len(values), "ms"))
    judged = (run.judge_stats or {}).get("latency_ms") or {}
    out += [RunValue(name, f[f"p{q}"], stage, int(f["n"]), "ms") for stage, f in sorted(judged.items())]
    return out


@register(
    "latency_p50_ms",
    family="operational",
    scale="ms",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("latency_ms", "judge_stats"),
    headline=True,
)
def latency_p50_ms(run: RunInputs) -> list[RunValue]:
    """Median latency per stage (the target's own timings, `wall` measured around the call, `judge:<prompt>` per judge prompt)."""  # noqa: E501
    return _latencies(run, 50, "latency_p50_ms")


@register(
    "latency_p95_ms",
    family="operational",
    scale="ms",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("latency_ms", "judge_stats"),
    headline=True,
)
def latency_p95_ms(run: RunInputs) -> list[RunValue]:
    """95th-percentile latency per stage."""
    return _latencies(run, 95, "latency_p95_ms")


def _rate(run: RunInputs, status: str, name: str) -> list[RunValue]:
    n = len(run.captures)
    if n == 0:
        return []
    return [RunValue(name, sum(c.status == status for c in run.captures) / n, None, n, "share")]


@register(
    "error_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("status",),
    headline=True,
)
def error_rate(run: RunInputs) -> list[RunValue]:
    """Share of cases whose capture failed (status error)."""
    return _rate(run, "error", "error_rate")


@register(
    "timeout_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("status",),
    headline=True,
)
def timeout_rate(run: RunInputs) -> list[RunValue]:
    """Share of cases whose capture timed out."""
    return _rate(run, "timeout", "timeout_rate")


@register(
    "empty_response_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("status", "answer"),
    headline=True,
)
def empty_response_rate(run: RunInputs) -> list[RunValue]:
    """Share of cases that returned an empty answer."""
    return _rate(run, "empty", "empty_response_rate")


@register(
    "target_cost_usd",
    family="operational",
    scale="usd",
    higher_is_better=False,
    seed="-",
    level="run",
    inputs=("cost_usd",),
)
def target_cost_usd(run: RunInputs) -> list[RunValue]:
    """What the target said its calls cost, added up over the captures that say (n; failed ones too: a failed call may be paid); absent when none says."""  # noqa: E501
    costs = [c.cost_usd for c in run.captures if c.cost_usd is not None]
    if not costs:
        return []
    return [RunValue("target_cost_usd", math.fsum(costs), None, len(costs), "usd")]


@register("suite_seconds", family="operational", scale="seconds", higher_is_better=False, seed="001", level="run")
def suite_seconds(run: RunInputs) -> list[RunValue]:
    """Wall time of the whole run."""
    if run.suite_seconds is None:
        return []
    return [RunValue("suite_seconds", run.suite_seconds, None, len(run.captures), "seconds")]


@register("stage_seconds", family="operational", scale="seconds", higher_is_better=False, seed="001", level="run")
def stage_seconds(run: RunInputs) -> list[RunValue]:
    """Wall time of each of raglake's own stages: inputs, capture, embedding, judge, scoring.

    inputs: loading and checking the golden set and the target (before the flow, when the command line
    checked them); capture: staging the batches and capturing; embedding_encode: of the embedding stage, the
    model's encode calls (the rest is waiting for the model's load and reading the staged texts)."""
    return [RunValue("stage_seconds", s, stage, len(run.captures), "seconds") for stage, s in run.stage_seconds.items()]


@register(
    "captures_reused",
    family="operational",
    scale="0-1",
    higher_is_better=None,
    seed="001",
    level="run",
    inputs=("captures_reused",),
)
def captures_reused(run: RunInputs) -> list[RunValue]:
    """Share of cases whose capture an earlier run of the same deterministic target made (reused from
    the staged results): their latencies are that run's, not measured in this one (absent: none)."""
    n = len(run.captures)
    if not run.captures_reused or n == 0:
        return []
    return [RunValue("captures_reused", run.captures_reused / n, None, n, "share")]


@register(
    "embedding_texts",
    family="operational",
    scale="count",
    higher_is_better=None,
    seed="003",
    level="run",
    inputs=("embedding_stats",),
)
def embedding_texts(run: RunInputs) -> list[RunValue]:
    """Distinct texts the embedding metrics needed, and how many the model had to encode (the rest came
    from the vector cache); `stage` says which."""
    if not run.embedding_stats:
        return []
    n = len(run.captures)
    return [
        RunValue("embedding_texts", run.embedding_stats[stage], stage, n, "texts") for stage in ("distinct", "encoded")
    ]
