"""The judge stage of a run: which judge steps each case needs, running them all through one gateway
(concurrently, under its limits), and the reliability spot-check: a second judgement of a sample of
questions, by a second model or by the prompts' variant wording (seed 001)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from raglake import progress
from raglake.errors import unexpected_error
from raglake.judge.budget import Budget
from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import GatewayStats, JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.judge.steps import NO_VARIANT, Judge, has_variant, prompt_refs, run_step
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
    spot_skipped: dict[str, str] = field(default_factory=dict)  # step -> why the spot-check did not repeat it


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


@dataclass(frozen=True)
class SpotSample:
    """How many questions the reliability spot-check judges twice (seed 001): max(share · N, minimum) of
    the run's N cases, or every case that can give a pair when fewer can."""

    share: float  # the run's spot_check settings (raglake.pipeline.settings.SpotCheckSettings) give both
    minimum: int

    def size(self, n_cases: int) -> int:
        return max(self.minimum, round(self.share * n_cases))


def judge_batch(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    judge_config: JudgeConfig,
    ledger: JudgeLedger,
    budget: Budget,
    encoder: Any = None,
    spot_check: JudgeConfig | None = None,
    spot_sample: SpotSample | None = None,
) -> JudgedBatch:
    """Every judge step the cases need, through the run's ledger and budget; with `spot_check`, the
    spot-check over the same cases (`pairs` is the whole run: the sample is drawn from all its cases)."""
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
            if spot_sample is None:
                raise ValueError("a spot-check needs its sample (share and minimum)")
            size = spot_sample.size(len(pairs))
            second = JudgeGateway(spot_check, ledger, budget)
            await _spot_check(batch, work, Judge(second, encoder, spot_check.prompt_variant), size)
            batch.stats.add(second.stats, "spot_check")  # run figures count every request, the spot-check's too
        batch.stats.summarise()
        return batch

    try:
        return asyncio.run(main())
    finally:
        ledger.flush()


async def _spot_check(batch: JudgedBatch, work: Work, second: Judge, size: int) -> None:
    """Judge `size` questions again (seed 001), drawn by a hash of their ids among the cases that can
    give a pair: a step the spot-check repeats whose first judgement is `ok` (an empty answer, a phrase-
    decided class or a failed first call gives none). A question the second judgement fails for is
    replaced by the next one, so `size` questions get two judgements whenever that many can; a round
    in which the second judgement fails for every question ends it (a judge that answers nothing). In
    variant wording, a step with its own prompt (a rubric) is not repeated: `spot_skipped` says why."""
    pairable: dict[str, Work] = {}
    for cid, step, view in work:
        first = batch.outcomes[cid][step.name]
        if step.spot_check is not None and second.variant and not has_variant(step):
            batch.spot_skipped[step.name] = NO_VARIANT  # a rubric: asked in its own words only
        elif step.spot_check is not None and first.status == "ok" and first.prompt_id is not None:
            pairable.setdefault(cid, []).append((cid, step, view))
    for name, why in sorted(batch.spot_skipped.items()):
        logging.getLogger(__name__).warning("spot-check: judge step %s not repeated: %s", name, why)
    order = sorted(pairable, key=_hash)
    size, judged, start = min(size, len(order)), set(), 0
    while len(judged) < size and start < len(order):
        take = order[start : start + size - len(judged)]
        start += len(take)
        again = [item for cid in take for item in pairable[cid]]
        got = set()
        for (cid, step, _), o in zip(again, await _run_steps(second, again, "spot-check")):
            if o.status == "ok":
                batch.spot_pairs.append((cid, step.name, step.disagree(batch.outcomes[cid][step.name], o)))
                got.add(cid)
        if not got:
            break
        judged |= got


def _hash(case_id: str) -> str:
    return hashlib.sha256(case_id.encode()).hexdigest()
