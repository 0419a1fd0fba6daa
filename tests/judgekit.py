"""A scripted judge for tests: answers every prompt with a valid, canned JSON object (shaped to the
case: one verdict per chunk or claim), through the real steps, without a server."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
from collections.abc import Callable, Sequence
from typing import Any

from raglake.judge.gateway import JudgeResult
from raglake.judge.prompts import Prompt
from raglake.judge.stage import steps_for, wanted_steps
from raglake.judge.steps import Judge, run_step
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric
from raglake.metrics.steps import CaseView, StepOutcome
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import land_scored_run, score_batch

LABELS = (
    "support_present",
    "unsupported_claim_present",
    "contradicted_claim_present",
    "response_on_topic",
    "helpful",
    "incomplete",
    "unsafe_content",
)


def canned(prompt_id: str, values: dict[str, Any]) -> dict[str, Any]:
    n_chunks = len(re.findall(r"^\[(\d+)\] ", values.get("contexts", ""), re.M))
    n_items = len(re.findall(r"^(\d+)\. ", values.get("claims", values.get("statements", "")), re.M))
    return {
        "groundedness": {"score": 4, "supported_claims": ["a"], "unsupported_claims": [], "reasoning": "r"},
        "correctness": {"score": 3, "reasoning": "r"},
        "wp_correctness": {"score": 3, "reasoning": "r"},
        "wp_relevance": {"score": 4, "reasoning": "r"},
        "wp_fact_check": {
            "answer_facts": [{"fact": "x", "supported_by": [1]}, {"fact": "y", "supported_by": []}],
            "answer_is_indistinct": False,
            "reference_facts": [],
            "chunks_used": [1],
        },
        "extract_claims": {"claims": ["c1", "c2"]},
        "verify_claims": {"verdicts": [{"claim": i + 1, "verdict": i % 2} for i in range(n_items)]},
        "context_precision": {"verdicts": [{"chunk": i + 1, "is_relevant": i == 0} for i in range(n_chunks)]},
        "extract_statements": {"statements": ["s1", "s2"]},
        "attribute_statements": {"attributions": [{"statement": i + 1, "attributed": 1} for i in range(n_items)]},
        "generate_questions": {"questions": ["What is it?", "Where is it?", "When was it?"]},
        "factual_accuracy": {
            "correctness": {"score": 80, "reasoning": "r"},
            "completeness": {"score": 60, "reasoning": "r"},
            "consistency": {"score": 100, "reasoning": "r"},
        },
        "answer_class": {"class": "CORRECT"},
        "abstention": {"abstained": True},
        "label_answer": {k: 1 for k in LABELS},
        "label_chunks": {
            "chunks": [
                {"chunk": i + 1, "topically_relevant": 1, "evidence_sufficient": int(i == 0), "misleading": 0}
                for i in range(n_chunks)
            ]
        },
        "acknowledges_conflict": {"acknowledges_conflict": 1},
    }[prompt_id]


class ScriptedGateway:
    """Stands in for JudgeGateway: `answer(prompt_id, values)` gives the output (a dict) or a JudgeResult."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], Any] = canned, model: str = "scripted-judge"):
        self.answer, self.model, self.calls = answer, model, []

    async def call(self, prompt: Prompt, values: dict[str, Any]) -> JudgeResult:
        prompt.render(values)  # a missing variable fails as it would for real
        self.calls.append((prompt.id, values))
        meta = dict(model=self.model, prompt_id=prompt.id, prompt_version=prompt.version)
        out = self.answer(prompt.id, values)
        if isinstance(out, JudgeResult):
            return out
        problem = prompt.validate_output(out)
        assert problem is None, (prompt.id, problem)  # the script itself must fit the schema
        return JudgeResult("ok", output=out, **meta)


def judge_outcomes(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    gateway: ScriptedGateway | None = None,
    encoder: Any = None,
) -> dict[str, dict[str, StepOutcome]]:
    """What the judge stage would hand the scoring batches, with a scripted judge."""
    judge = Judge(gateway or ScriptedGateway(), encoder)
    wanted = wanted_steps(metrics)
    work = [
        (case.id, step, CaseView.of(case, capture, config.k))
        for case, capture in pairs
        for step in steps_for(CaseContext(case, capture, config), wanted)
    ]

    async def run() -> list[StepOutcome]:
        return list(await asyncio.gather(*(run_step(judge, step, view) for _, step, view in work)))

    out: dict[str, dict[str, StepOutcome]] = {case.id: {} for case, _ in pairs}
    for (cid, step, _), outcome in zip(work, asyncio.run(run())):
        out[cid][step.name] = outcome
    return out


def land_judged(
    lake: str,
    golden: str,
    target: str,
    run_id: str,
    metrics: Sequence[str],
    gateway: ScriptedGateway | None = None,
) -> str:
    """Score `target` on `golden` with a scripted judge and land it as `run_id` (no Prefect, no server)."""
    plan = plan_run(RunSettings(golden=golden, target=target, lake=lake, run_id=run_id, metrics=list(metrics)))
    captures = plan.target.capture(plan.golden.cases)
    pairs = list(zip(plan.golden.cases, captures))
    embedding = plan.embedding_spec()
    encoder = embedding.encoder() if embedding else None
    outcomes = judge_outcomes(pairs, plan.metrics, plan.config, gateway, encoder)
    scored = score_batch(pairs, plan.metrics, plan.config, encoder=encoder, judge=outcomes)
    finished = dt.datetime.now(dt.timezone.utc)
    record = plan.record(finished, len(captures), embedder_key=embedding.key if embedding else None)
    land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, [], plan.scoring_id)
    return run_id
