"""Running judge steps (declared in raglake.metrics.steps): the calls a case needs for the judge metrics
(one prompt, or two in sequence), each ending in an outcome with a status. Metrics read outcomes; they
never call a model."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from typing import Any

from raglake.errors import ConfigError
from raglake.judge.gateway import JudgeGateway, JudgeResult
from raglake.judge.prompts import Prompt, defined_prompt, get_prompt, get_variant, load_prompts
from raglake.metrics import rules, steps
from raglake.metrics.steps import CaseView, JudgeStep, StepOutcome


def _failed(result: JudgeResult) -> StepOutcome:
    return StepOutcome(
        result.status,
        reason=result.reason,
        model=result.model,
        prompt_id=result.prompt_id,
        prompt_version=result.prompt_version,
        call_key=result.call_key,
    )


def _done(result: JudgeResult, data: dict[str, Any]) -> StepOutcome:
    return StepOutcome(
        "ok",
        data,
        model=result.model,
        prompt_id=result.prompt_id,
        prompt_version=result.prompt_version,
        call_key=result.call_key,
    )


def _parse_error(result: JudgeResult, why: str) -> StepOutcome:
    """The judge answered, but not about what it was asked (claims, statements or chunks that do not match)."""
    return StepOutcome(
        "parse_error",
        reason=f"parse_error: {why}",
        model=result.model,
        prompt_id=result.prompt_id,
        prompt_version=result.prompt_version,
        call_key=result.call_key,
    )


# why a step with its own prompt (a rubric) is not repeated by a spot-check in variant wording
NO_VARIANT = (
    "a rubric's prompt has no variant wording: the spot-check's --spot-check-variant does not repeat it "
    "(spot-check it with a second model, --spot-check-model)"
)


def step_prompt(step: JudgeStep, prompt_id: str | None = None) -> Prompt:
    """A prompt of the step (its first by default): the one it carries (a rubric's, versioned by its
    content), else the prompt file of that id."""
    pid = prompt_id or step.prompts[0]
    if step.prompt_spec is not None and pid == step.prompts[0]:
        return defined_prompt(step.prompt_spec)
    return get_prompt(pid)


def has_variant(step: JudgeStep) -> bool:
    """Can the spot-check ask this step in its variant wording? Not a step with its own prompt (a rubric)."""
    return step.prompt_spec is None


class Judge:
    """A gateway plus what judge steps need besides it (the run's embedder, for answer_relevance); with
    `variant`, every prompt is asked in its variant wording (the spot-check's option B)."""

    def __init__(self, gateway: JudgeGateway, encoder: Any = None, variant: bool = False):
        self.gateway, self.encoder, self.variant = gateway, encoder, variant

    async def ask(self, prompt: str | Prompt, **values: Any) -> JudgeResult:
        """Ask a prompt (a prompt file's id, or a Prompt such as a rubric's) with these values."""
        chosen = get_prompt(prompt) if isinstance(prompt, str) else prompt
        if self.variant:
            if chosen.id not in load_prompts():  # not a prompt file (a rubric's own): no variant wording exists
                raise ConfigError(f"prompt {chosen.ref}: {NO_VARIANT}")
            chosen = get_variant(chosen.id)
        return await self.gateway.call(chosen, values)


StepFn = Callable[[Judge, CaseView], Awaitable[StepOutcome]]


async def _single(j: Judge, prompt: str | Prompt, **values: Any) -> StepOutcome:
    result = await j.ask(prompt, **values)
    return _done(result, result.output) if result.ok else _failed(result)


async def _faithfulness(j: Judge, c: CaseView) -> StepOutcome:
    claims = await j.ask("extract_claims", question=c.question, answer=c.answer)
    if not claims.ok:
        return _failed(claims)
    items = [s for s in claims.output["claims"] if s.strip()]
    if not items:
        return _done(claims, {"claims": [], "supported": []})
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(items, start=1))
    verified = await j.ask("verify_claims", claims=numbered, contexts=c.contexts)
    if not verified.ok:
        return _failed(verified)
    verdicts = {v["claim"]: v["verdict"] for v in verified.output["verdicts"]}
    if set(verdicts) != set(range(1, len(items) + 1)):
        return _parse_error(verified, f"{len(items)} claims but verdicts for {sorted(verdicts)}")
    return _done(verified, {"claims": items, "supported": [verdicts[i] for i in range(1, len(items) + 1)]})


async def _context_recall(j: Judge, c: CaseView) -> StepOutcome:
    extracted = await j.ask("extract_statements", question=c.question, reference=c.reference)
    if not extracted.ok:
        return _failed(extracted)
    statements = [s for s in extracted.output["statements"] if s.strip()]
    if not statements or not c.chunks:  # METRICS.md: no statements → 1.0; no chunks → 0
        return _done(extracted, {"statements": statements, "attributed": [0] * len(statements)})
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(statements, start=1))
    attributed = await j.ask("attribute_statements", statements=numbered, contexts=c.contexts)
    if not attributed.ok:
        return _failed(attributed)
    marks = {a["statement"]: a["attributed"] for a in attributed.output["attributions"]}
    if set(marks) != set(range(1, len(statements) + 1)):
        return _parse_error(attributed, f"{len(statements)} statements but attributions for {sorted(marks)}")
    return _done(
        attributed, {"statements": statements, "attributed": [marks[i] for i in range(1, len(statements) + 1)]}
    )


async def _per_chunk(j: Judge, c: CaseView, prompt_id: str, key: str, **values: Any) -> StepOutcome:
    """A prompt answering once per numbered chunk; the answer must cover every chunk exactly once."""
    result = await j.ask(prompt_id, contexts=c.contexts, **values)
    if not result.ok:
        return _failed(result)
    rows = {r["chunk"]: r for r in result.output[key]}
    if set(rows) != set(range(1, len(c.chunks) + 1)):
        return _parse_error(result, f"{len(c.chunks)} chunks but verdicts for {sorted(rows)}")
    return _done(result, {"chunks": [rows[i] for i in range(1, len(c.chunks) + 1)]})


async def _answer_relevance(j: Judge, c: CaseView) -> StepOutcome:
    result = await j.ask("generate_questions", answer=c.answer)
    if not result.ok:
        return _failed(result)
    questions = [q for q in result.output["questions"] if q.strip()]
    vectors = j.encoder.encode([c.question, *questions], caller="judge_answer_relevance")
    cosines = [float(v) for v in vectors[1:] @ vectors[0]]
    return _done(result, {"questions": questions, "cosines": cosines, "embedder": j.encoder.embedder.key})


async def _answer_class(j: Judge, c: CaseView) -> StepOutcome:
    if rules.is_dont_know(c.answer):  # seed 004: the uncertainty phrases come before the judge
        return StepOutcome("ok", {"class": "DON'T KNOW", "by": "uncertainty_phrases"})
    return await _single(j, "answer_class", question=c.question, reference=c.reference, answer=c.answer)


def _context_precision(j: Judge, c: CaseView) -> Awaitable[StepOutcome]:
    return _per_chunk(j, c, "context_precision", "verdicts", question=c.question, reference=c.reference)


def _label_chunks(j: Judge, c: CaseView) -> Awaitable[StepOutcome]:
    return _per_chunk(j, c, "label_chunks", "chunks", question=c.question)


# the steps that are more than one call of their first prompt with the step's values
RUNNERS: dict[JudgeStep, StepFn] = {
    steps.FAITHFULNESS: _faithfulness,
    steps.CONTEXT_PRECISION: _context_precision,
    steps.CONTEXT_RECALL: _context_recall,
    steps.ANSWER_RELEVANCE: _answer_relevance,
    steps.ANSWER_CLASS: _answer_class,
    steps.LABEL_CHUNKS: _label_chunks,
}


def prompt_refs(step_list: Iterable[JudgeStep]) -> tuple[str, str]:
    """("p1+p2", "v1+v2"): every prompt the steps use (sorted), with its current version, as score rows
    record them."""
    versions = prompt_versions(step_list)
    prompts = sorted(versions)
    return "+".join(prompts), "+".join(str(versions[p]) for p in prompts)


def prompt_versions(step_list: Iterable[JudgeStep]) -> dict[str, int]:
    """Every prompt the steps may use, with its current version (a rubric's: its content_version)."""
    return {p: step_prompt(s, p).version for s in sorted(step_list, key=lambda s: s.name) for p in s.prompts}


async def run_step(judge: Judge, step: JudgeStep, view: CaseView) -> StepOutcome:
    """Run one step for one case. An outcome that reached the judge carries every prompt of the step with
    the versions the call used; one decided without a call carries none."""
    runner = RUNNERS.get(step)
    o = await (runner(judge, view) if runner else _single(judge, step_prompt(step), **step.values(view)))
    if o.prompt_id is None:
        return o
    ids, versions = prompt_refs([step])
    return replace(o, prompt_id=ids, prompt_version=versions)
