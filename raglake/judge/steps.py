"""Judge steps: the calls a case needs for the judge metrics (one prompt, or two in sequence),
each ending in an outcome with a status. Metrics read outcomes; they never call a model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from raglake.judge.gateway import JudgeGateway, JudgeResult
from raglake.judge.prompts import get_prompt
from raglake.metrics import rules
from raglake.schemas import Capture, GoldenCase


@dataclass(frozen=True)
class StepOutcome:
    status: str  # ok | undefined | judge_error | parse_error | skipped
    data: dict[str, Any] | None = None
    reason: str | None = None
    model: str | None = None
    prompt_id: str | None = None
    prompt_version: int | None = None
    call_key: str | None = None  # the (last) judge call in the ledger: its request, response and reasoning

    @staticmethod
    def undefined(reason: str) -> StepOutcome:
        return StepOutcome("undefined", reason=reason)

    @staticmethod
    def failed(result: JudgeResult) -> StepOutcome:
        return StepOutcome(result.status, reason=result.reason, model=result.model, prompt_id=result.prompt_id,
                           prompt_version=result.prompt_version, call_key=result.call_key)

    @staticmethod
    def done(result: JudgeResult, data: dict[str, Any]) -> StepOutcome:
        return StepOutcome("ok", data, model=result.model, prompt_id=result.prompt_id,
                           prompt_version=result.prompt_version, call_key=result.call_key)


@dataclass(frozen=True)
class CaseView:
    """What the judge prompts see of a case: texts only, chunks numbered by rank."""

    case_id: str
    question: str
    answer: str
    reference: str
    chunks: tuple[str, ...]
    abstained: bool | None
    recency_rule: str | None

    @classmethod
    def of(cls, case: GoldenCase, capture: Capture, k: int) -> CaseView:
        return cls(case.id, case.question, capture.answer.strip(), (case.reference_answer or "").strip(),
                   tuple(c.text for c in capture.top_k(k) if c.text.strip()), capture.abstained, case.recency_conflict_rule)

    @property
    def contexts(self) -> str:
        return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(self.chunks, start=1))


class Judge:
    """A gateway plus what judge steps need besides it (the run's embedder, for answer_relevance)."""

    def __init__(self, gateway: JudgeGateway, encoder: Any = None):
        self.gateway, self.encoder = gateway, encoder

    async def ask(self, prompt_id: str, **values: Any) -> JudgeResult:
        return await self.gateway.call(get_prompt(prompt_id), values)


StepFn = Callable[[Judge, CaseView], Awaitable[StepOutcome]]


@dataclass(frozen=True)
class Step:
    name: str
    prompts: tuple[str, ...]
    check: Callable[[CaseView], str | None]  # a reason the step cannot apply (decided without a judge), or None
    values: Callable[[CaseView], dict[str, str]]  # the variables of its first prompt
    run: StepFn | None = None  # None: one call of the first prompt with `values`

    async def __call__(self, judge: Judge, view: CaseView) -> StepOutcome:
        return await (self.run(judge, view) if self.run else _single(judge, self.prompts[0], **self.values(view)))


def _needs(*fields: str) -> Callable[[CaseView], str | None]:
    reasons = {"answer": "empty_answer", "reference": "no_reference", "chunks": "no_chunks"}

    def check(c: CaseView) -> str | None:
        return next((reasons[f] for f in fields if not getattr(c, f)), None)

    return check


async def _single(j: Judge, prompt_id: str, **values: Any) -> StepOutcome:
    result = await j.ask(prompt_id, **values)
    return StepOutcome.done(result, result.output) if result.ok else StepOutcome.failed(result)


async def _faithfulness(j: Judge, c: CaseView) -> StepOutcome:
    claims = await j.ask("extract_claims", question=c.question, answer=c.answer)
    if not claims.ok:
        return StepOutcome.failed(claims)
    items = [s for s in claims.output["claims"] if s.strip()]
    if not items:
        return StepOutcome.done(claims, {"claims": [], "supported": []})
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(items, start=1))
    verified = await j.ask("verify_claims", claims=numbered, contexts=c.contexts)
    if not verified.ok:
        return StepOutcome.failed(verified)
    verdicts = {v["claim"]: v["verdict"] for v in verified.output["verdicts"]}
    if set(verdicts) != set(range(1, len(items) + 1)):
        return StepOutcome("parse_error", reason=f"parse_error: {len(items)} claims but verdicts for {sorted(verdicts)}",
                           model=verified.model, prompt_id=verified.prompt_id, prompt_version=verified.prompt_version,
                           call_key=verified.call_key)
    return StepOutcome.done(verified, {"claims": items, "supported": [verdicts[i] for i in range(1, len(items) + 1)]})


async def _context_recall(j: Judge, c: CaseView) -> StepOutcome:
    extracted = await j.ask("extract_statements", question=c.question, reference=c.reference)
    if not extracted.ok:
        return StepOutcome.failed(extracted)
    statements = [s for s in extracted.output["statements"] if s.strip()]
    if not statements or not c.chunks:  # METRICS.md: no statements → 1.0; no chunks → 0
        return StepOutcome.done(extracted, {"statements": statements, "attributed": [0] * len(statements)})
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(statements, start=1))
    attributed = await j.ask("attribute_statements", statements=numbered, contexts=c.contexts)
    if not attributed.ok:
        return StepOutcome.failed(attributed)
    marks = {a["statement"]: a["attributed"] for a in attributed.output["attributions"]}
    if set(marks) != set(range(1, len(statements) + 1)):
        return StepOutcome("parse_error", reason=f"parse_error: {len(statements)} statements but attributions for {sorted(marks)}",
                           model=attributed.model, prompt_id=attributed.prompt_id, prompt_version=attributed.prompt_version,
                           call_key=attributed.call_key)
    return StepOutcome.done(attributed, {"statements": statements, "attributed": [marks[i] for i in range(1, len(statements) + 1)]})


async def _per_chunk(j: Judge, c: CaseView, prompt_id: str, key: str, **values: Any) -> StepOutcome:
    """A prompt answering once per numbered chunk; the answer must cover every chunk exactly once."""
    result = await j.ask(prompt_id, contexts=c.contexts, **values)
    if not result.ok:
        return StepOutcome.failed(result)
    rows = {r["chunk"]: r for r in result.output[key]}
    if set(rows) != set(range(1, len(c.chunks) + 1)):
        return StepOutcome("parse_error", reason=f"parse_error: {len(c.chunks)} chunks but verdicts for {sorted(rows)}",
                           model=result.model, prompt_id=result.prompt_id, prompt_version=result.prompt_version,
                           call_key=result.call_key)
    return StepOutcome.done(result, {"chunks": [rows[i] for i in range(1, len(c.chunks) + 1)]})


async def _answer_relevance(j: Judge, c: CaseView) -> StepOutcome:
    result = await j.ask("generate_questions", answer=c.answer)
    if not result.ok:
        return StepOutcome.failed(result)
    questions = [q for q in result.output["questions"] if q.strip()]
    vectors = j.encoder.encode([c.question, *questions], caller="judge_answer_relevance")
    cosines = [float(v) for v in vectors[1:] @ vectors[0]]
    return StepOutcome.done(result, {"questions": questions, "cosines": cosines, "embedder": j.encoder.embedder.key})


async def _answer_class(j: Judge, c: CaseView) -> StepOutcome:
    if rules.is_dont_know(c.answer):  # seed 004: the uncertainty phrases come before the judge
        return StepOutcome("ok", {"class": "DON'T KNOW", "by": "uncertainty_phrases"})
    return await _single(j, "answer_class", question=c.question, reference=c.reference, answer=c.answer)


def _qa(v: CaseView) -> dict[str, str]:
    return {"question": v.question, "answer": v.answer}


def _qra(v: CaseView) -> dict[str, str]:
    return {"question": v.question, "reference": v.reference, "answer": v.answer}


STEPS: dict[str, Step] = {s.name: s for s in (
    Step("groundedness", ("groundedness",), _needs("answer", "chunks"), lambda v: {"answer": v.answer, "contexts": v.contexts}),
    Step("correctness", ("correctness",), _needs("answer", "chunks"), lambda v: {**_qa(v), "contexts": v.contexts}),
    Step("wp_correctness", ("wp_correctness",), _needs("answer", "reference"), _qra),
    Step("wp_fact_check", ("wp_fact_check",), _needs("answer", "chunks"),
         lambda v: {"answer": v.answer, "reference": v.reference or "(none)", "contexts": v.contexts}),
    Step("wp_relevance", ("wp_relevance",), _needs("answer"), _qa),
    Step("faithfulness", ("extract_claims", "verify_claims"), _needs("answer", "chunks"), _qa, _faithfulness),
    Step("context_precision", ("context_precision",), _needs("reference", "chunks"),
         lambda v: {"question": v.question, "reference": v.reference, "contexts": v.contexts},
         lambda j, c: _per_chunk(j, c, "context_precision", "verdicts", question=c.question, reference=c.reference)),
    Step("context_recall", ("extract_statements", "attribute_statements"), _needs("reference"),
         lambda v: {"question": v.question, "reference": v.reference}, _context_recall),
    Step("answer_relevance", ("generate_questions",), _needs("answer"), lambda v: {"answer": v.answer}, _answer_relevance),
    Step("factual_accuracy", ("factual_accuracy",), _needs("answer", "reference"), _qra),
    Step("answer_class", ("answer_class",), _needs("answer", "reference"), _qra, _answer_class),
    Step("abstention", ("abstention",), _needs("answer"), _qa),
    Step("label_answer", ("label_answer",), _needs("answer"), lambda v: {**_qa(v), "contexts": v.contexts or "(none)"}),
    Step("label_chunks", ("label_chunks",), _needs("chunks"), lambda v: {"question": v.question, "contexts": v.contexts},
         lambda j, c: _per_chunk(j, c, "label_chunks", "chunks", question=c.question)),
    Step("acknowledges_conflict", ("acknowledges_conflict",), _needs("answer"), _qa),
)}


def mean_cosine(outcome: StepOutcome) -> float:
    return float(np.mean(outcome.data["cosines"])) if outcome.data and outcome.data.get("cosines") else float("nan")
