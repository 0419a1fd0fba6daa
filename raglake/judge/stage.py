"""The judge stage of a run: which judge steps each case needs, running them all through one gateway
(concurrently, under its limits), and the reliability spot-check with a second judge."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from raglake import progress
from raglake.errors import unexpected_error
from raglake.judge.budget import Budget
from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import GatewayStats, JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.judge.steps import STEPS, CaseView, Judge, StepOutcome
from raglake.lake.store import Lake
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, Capture, GoldenCase

JUDGE_LABELS = tuple(n for n in ANSWER_LABELS if n not in ("source_cited", "fabricated_source", "proper_action",
                                                             "acknowledges_conflict"))
SPOT_CHECK_STEPS = {"groundedness": 1.0, "correctness": 1.0, "wp_correctness": 1.0, "wp_relevance": 1.0,
                    "factual_accuracy": 5.0, "answer_class": None}  # how to put each on a 0-5 scale; None: a class

_LOCK = threading.Lock()
_LEDGERS: dict[tuple[str, str | None], JudgeLedger] = {}
_BUDGETS: dict[tuple[str, str | None], Budget] = {}


def wanted_steps(metrics: Sequence[Metric]) -> set[str]:
    return {i.split(":", 1)[1] for m in metrics for i in m.inputs if i.startswith("judge:")}


def steps_for(ctx: CaseContext, wanted: set[str]) -> list[str]:
    """The steps this case needs a call for (inapplicable ones are decided without a judge)."""
    if ctx.capture.failed:
        return []
    view = CaseView.of(ctx.case, ctx.capture, ctx.k)
    out = []
    for step in sorted(wanted):
        if STEPS[step].check(view):
            continue
        if step == "abstention" and (ctx.case.answerable or ctx.capture.abstained is not None):
            continue
        if step == "label_answer" and all(n in ctx.human_answer_labels for n in JUDGE_LABELS):
            continue
        if step == "label_chunks" and all(
            lab is not None and all(getattr(lab, n) is not None for n in CHUNK_LABELS) for lab in ctx.chunk_labels
        ):
            continue
        if step == "acknowledges_conflict" and not _needs_conflict_label(ctx):
            continue
        out.append(step)
    return out


def _needs_conflict_label(ctx: CaseContext) -> bool:
    if ctx.case.recency_conflict_rule != "acknowledge_both" or "acknowledges_conflict" in ctx.human_answer_labels:
        return False
    return bool(ctx.case.gold_supports) and all(ctx.reference_matches(i) for i in range(len(ctx.case.gold_supports)))


def shared(config: JudgeConfig, lake_url: str, run_id: str | None) -> tuple[JudgeLedger, Budget]:
    """One ledger and one budget per (lake, run) in this process, whatever the batching."""
    key = (lake_url, run_id)
    with _LOCK:
        if key not in _LEDGERS:
            _LEDGERS[key] = JudgeLedger(Lake(lake_url), run_id)
            _BUDGETS[key] = Budget(config.max_calls, config.max_cost_usd)
        return _LEDGERS[key], _BUDGETS[key]


@dataclass
class JudgedBatch:
    outcomes: dict[str, dict[str, StepOutcome]] = field(default_factory=dict)  # case id -> step -> outcome
    stats: GatewayStats = field(default_factory=GatewayStats)
    spot_pairs: list[tuple[str, str, bool]] = field(default_factory=list)  # (case id, step, disagree)


async def _run_steps(judge: Judge, work: list[tuple[str, str, CaseView]], stage: str = "judge") -> list[StepOutcome]:
    progress.start(stage, len(work), "steps")

    async def one(step: str, view: CaseView) -> StepOutcome:
        try:
            outcome = await STEPS[step](judge, view)
        except Exception as e:  # noqa: BLE001 - one step's surprise is its case's judge_error, never the stage's
            outcome = StepOutcome("judge_error", reason=f"judge_error: {unexpected_error(e)}")
        progress.advance(stage)
        return outcome

    return list(await asyncio.gather(*(one(step, view) for _, step, view in work)))


def judge_batch(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    judge_config: JudgeConfig,
    lake_url: str,
    run_id: str | None,
    encoder: Any = None,
    spot_check: JudgeConfig | None = None,
    spot_ids: frozenset[str] = frozenset(),
) -> JudgedBatch:
    """Every judge step the batch's cases need, through the run's ledger and budget."""
    wanted = wanted_steps(metrics)
    ledger, budget = shared(judge_config, lake_url, run_id)
    work = []
    for case, capture in pairs:
        ctx = CaseContext(case, capture, config)
        view = CaseView.of(case, capture, config.k)
        work += [(case.id, step, view) for step in steps_for(ctx, wanted)]

    async def main() -> JudgedBatch:
        gateway = JudgeGateway(judge_config, ledger, budget)
        batch = JudgedBatch(stats=gateway.stats)
        outcomes = await _run_steps(Judge(gateway, encoder), work)
        for (case_id, step, _), o in zip(work, outcomes):
            batch.outcomes.setdefault(case_id, {})[step] = o
        if spot_check is not None:
            again = [(cid, step, view) for cid, step, view in work
                     if cid in spot_ids and step in SPOT_CHECK_STEPS and batch.outcomes[cid][step].status == "ok"]
            second = JudgeGateway(spot_check, ledger, budget)
            for (cid, step, _), o in zip(again, await _run_steps(Judge(second, encoder), again, "spot-check")):
                if o.status == "ok":
                    batch.spot_pairs.append((cid, step, disagree(step, batch.outcomes[cid][step], o)))
            batch.stats.add(second.stats)  # run figures count every request, the spot-check's included
        return batch

    try:
        return asyncio.run(main())
    finally:
        ledger.flush()


def spot_cases(case_ids: Sequence[str], share: float = 0.1, minimum: int = 10) -> frozenset[str]:
    """The spot-check sample (seed 001): max(share · N, minimum) cases, chosen by a hash of their ids so
    the same golden set always gives the same sample."""
    n = min(len(case_ids), max(minimum, round(share * len(case_ids))))
    return frozenset(sorted(case_ids, key=lambda cid: hashlib.sha256(cid.encode()).hexdigest())[:n])


def disagree(step: str, first: StepOutcome, second: StepOutcome) -> bool:
    """Scores more than 1 point apart on a 0-5 view, or different classes (seed 001)."""
    scale = SPOT_CHECK_STEPS[step]
    if scale is None:
        return first.data["class"] != second.data["class"]
    return abs(_score(step, first) - _score(step, second)) * scale > 1


def _score(step: str, o: StepOutcome) -> float:
    if step == "factual_accuracy":
        d = o.data
        return (0.5 * d["correctness"]["score"] + 0.3 * d["completeness"]["score"] + 0.2 * d["consistency"]["score"]) / 100
    return float(o.data["score"])
