"""Abstention on unanswerable questions (METRICS.md §5, seed 001): the explicit `abstained` field
first, then (once a judge is configured) the judge's classification, the uncertainty phrases last."""

from __future__ import annotations

import numpy as np

from raglake.metrics import rules
from raglake.metrics.columnar import BatchContext, Column
from raglake.metrics.columnar_answers import abstained
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, columnar_form, register
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
    version="3",  # 3: a judge reply that is no real answer (raglake.judge.honesty) no longer classifies
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
    version="3",  # as abstention_accuracy
    applies_to="unanswerable",
    inputs=("abstained", "answer"),
    steps=(ABSTENTION,),
    headline=True,
)
def hallucination_rate_unanswerable(ctx: CaseContext) -> Score:
    """Unanswerable only: 1 − abstention_accuracy (it answered anyway)."""
    did, how = _abstained(ctx)
    return Score.ok(float(not did), source=how)


def _abstained_columns(bc: BatchContext, value_if_abstained: float) -> Column:
    """Without a judge: the explicit field, else the uncertainty phrases."""
    col = Column(bc.n)
    did, explicit = abstained(bc)
    rows = np.ones(bc.n, dtype=bool)
    col.ok(rows, np.where(did, value_if_abstained, 1.0 - value_if_abstained))
    col.sources(rows, np.where(explicit, 0, 1), ["abstained_field", "uncertainty_phrases"])
    return col


@columnar_form("abstention_accuracy")
def _abstention_accuracy_columns(bc: BatchContext) -> Column:
    return _abstained_columns(bc, 1.0)


@columnar_form("hallucination_rate_unanswerable")
def _hallucination_columns(bc: BatchContext) -> Column:
    return _abstained_columns(bc, 0.0)
