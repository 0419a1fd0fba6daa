"""Abstention on unanswerable questions (METRICS.md §5, seed 001): the explicit `abstained` field
first, then (once a judge is configured) the judge's classification, the uncertainty phrases last."""

from __future__ import annotations

from raglake.metrics import rules
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, register
from raglake.metrics.steps import ABSTENTION


def _abstained(ctx: CaseContext) -> tuple[bool, str]:
    """The explicit field, else the judge's classification (when a judge ran), else the phrases."""
    explicit = ctx.capture.abstained
    if explicit is None and "abstained" in ctx.judge_labels:
        label = ctx.judge_labels["abstained"]
        return bool(label.value), label.source
    return rules.abstained(ctx.capture)


@register(
    "abstention_accuracy",
    family="abstention",
    scale="binary",
    higher_is_better=True,
    seed="001",
    version="2",
    applies_to="unanswerable",
    inputs=("abstained", "answer"),
    steps=(ABSTENTION,),
    headline=True,
    worst_cases=True,
)
def abstention_accuracy(ctx: CaseContext) -> Score:
    """Unanswerable only: 1 if the target abstained, else 0."""
    did, how = _abstained(ctx)
    return Score.ok(float(did), source=how)


@register(
    "hallucination_rate_unanswerable",
    family="abstention",
    scale="binary",
    higher_is_better=False,
    seed="001",
    version="2",
    applies_to="unanswerable",
    inputs=("abstained", "answer"),
    steps=(ABSTENTION,),
    headline=True,
)
def hallucination_rate_unanswerable(ctx: CaseContext) -> Score:
    """Unanswerable only: 1 − abstention_accuracy (it answered anyway)."""
    did, how = _abstained(ctx)
    return Score.ok(float(not did), source=how)
