"""The judge stage of a run: which judge steps each case needs, running them all through one gateway
(concurrently, under its limits), and the reliability spot-check with a second judge."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raglake import progress
from raglake.errors import unexpected_error
from raglake.judge.budget import Budget
from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import GatewayStats, JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.judge.steps import Judge, prompt_refs, run_step
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric
from raglake.metrics.steps import CaseView, JudgeStep, StepOutcome
from raglake.schemas import Capture, GoldenCase


def wanted_steps(metrics: Sequence[Metric]) -> set[JudgeStep]:
    """The judge steps the metrics read."""
    return {step for m in metrics for step in m.steps}


def steps_for(ctx: CaseContext, wanted: Iterable[JudgeStep]) -> list[JudgeStep]:
    """The steps this case needs a call for, by name (each step decides; inapplicable ones need no judge)."""
    return [step for step in sorted(wanted, key=lambda s: s.name) if step.needed(ctx)]


@dataclass
class JudgedBatch:
    outcomes: dict[str, dict[str, StepOutcome]] = field(default_factory=dict)  # case id -> step name -> outcome
    stats: GatewayStats = field(default_factory=GatewayStats)
    spot_pairs: list[tuple[str, str, bool]] = field(default_factory=list)  # (case id, step, disagree)


Work = list[tuple[str, JudgeStep, CaseView]]


async def _run_steps(judge: Judge, work: Work, stage: str = "judge") -> list[StepOutcome]:
    progress.start(stage, len(work), "steps")

    async def one(step: JudgeStep, view: CaseView) -> StepOutcome:
        try:
            outcome = await run_step(judge, step, view)
        except Exception as e:  # noqa: BLE001 - one step's surprise is its case's judge_error, never the stage's
            ids, versions = prompt_refs([step])
            outcome = StepOutcome(
                "judge_error", reason=f"judge_error: {unexpected_error(e)}", prompt_id=ids, prompt_version=versions
            )
        progress.advance(stage)
        return outcome

    return list(await asyncio.gather(*(one(step, view) for _, step, view in work)))


def judge_batch(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    judge_config: JudgeConfig,
    ledger: JudgeLedger,
    budget: Budget,
    encoder: Any = None,
    spot_check: JudgeConfig | None = None,
    spot_ids: frozenset[str] = frozenset(),
) -> JudgedBatch:
    """Every judge step the batch's cases need, through the run's ledger and budget."""
    wanted = wanted_steps(metrics)
    work: Work = []
    for case, capture in pairs:
        view = CaseView.of(case, capture, config.k)
        work += [(case.id, step, view) for step in steps_for(CaseContext(case, capture, config), wanted)]

    async def main() -> JudgedBatch:
        gateway = JudgeGateway(judge_config, ledger, budget)
        batch = JudgedBatch(stats=gateway.stats)
        outcomes = await _run_steps(Judge(gateway, encoder), work)
        for (case_id, step, _), o in zip(work, outcomes):
            batch.outcomes.setdefault(case_id, {})[step.name] = o
        if spot_check is not None:
            again = [
                (cid, step, view)
                for cid, step, view in work
                if cid in spot_ids and step.spot_check is not None and batch.outcomes[cid][step.name].status == "ok"
            ]
            second = JudgeGateway(spot_check, ledger, budget)
            for (cid, step, _), o in zip(again, await _run_steps(Judge(second, encoder), again, "spot-check")):
                if o.status == "ok":
                    batch.spot_pairs.append((cid, step.name, step.disagree(batch.outcomes[cid][step.name], o)))
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
