"""Judge steps, declared (the metrics layer): the prompts a step asks, when it applies to a case and
whether a case needs a call at all. The judge layer (raglake.judge.steps) runs them; metrics read the
StepOutcome each run leaves, and name the steps they read as these objects (`register(steps=...)`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from raglake.errors import ConfigError, UnknownNameError
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, Capture, GoldenCase

if TYPE_CHECKING:  # annotations only: context.py reads the step names declared here
    from raglake.metrics.context import CaseContext

# the answer labels a judge gives (label_answer); the others come from rules or from their own step
JUDGE_LABELS = tuple(
    n for n in ANSWER_LABELS if n not in ("source_cited", "fabricated_source", "proper_action", "acknowledges_conflict")
)
GEVAL_WEIGHTS = {"correctness": 0.5, "completeness": 0.3, "consistency": 0.2}  # factual_accuracy (seed 004)


@dataclass(frozen=True)
class StepOutcome:
    """What one judge step gave for one case. `prompt_id`/`prompt_version`: every prompt of the step
    ("+"-joined, sorted) at the versions the call used; None when no call was made."""

    status: str  # ok | undefined | judge_error | parse_error | skipped
    data: dict[str, Any] | None = None
    reason: str | None = None
    model: str | None = None
    prompt_id: str | None = None
    prompt_version: str | int | None = None
    call_key: str | None = None  # the (last) judge call in the ledger: its request, response and reasoning

    @staticmethod
    def undefined(reason: str) -> StepOutcome:
        return StepOutcome("undefined", reason=reason)

    def judge_meta(self) -> dict[str, str | None]:
        """The judge columns of a score row built from this outcome."""
        version = None if self.prompt_version is None else str(self.prompt_version)
        return {
            "judge_model": self.model,
            "prompt_id": self.prompt_id,
            "prompt_version": version,
            "judge_call": self.call_key,
        }


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
        chunks = tuple(c.text for c in capture.top_k(k) if c.text.strip())
        return cls(
            case.id,
            case.question,
            capture.answer.strip(),
            (case.reference_answer or "").strip(),
            chunks,
            capture.abstained,
            case.recency_conflict_rule,
        )

    @property
    def contexts(self) -> str:
        return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(self.chunks, start=1))


_MISSING = {"answer": "empty_answer", "reference": "no_reference", "chunks": "no_chunks"}


def geval_score(d: dict[str, Any]) -> float:
    """factual_accuracy: (0.5·correctness + 0.3·completeness + 0.2·consistency) / 100."""
    return sum(w * d[part]["score"] for part, w in GEVAL_WEIGHTS.items()) / 100


def _judge_score(d: dict[str, Any]) -> float:
    return float(d["score"])


@dataclass(frozen=True)
class JudgeStep:
    """One judge step. Equal (and hashed) by name, prompts and its own prompt, so a step survives pickling.

    A built-in step's prompts are files of the judge layer, named by id. A step defined at run time (a
    user's rubric: raglake.metrics.rubrics) carries its one prompt itself, `prompt_spec`: the JSON of a
    judge prompt's fields less its version (raglake.judge.prompts.Prompt; the judge layer derives the
    version from the rendered template), so that it travels whole to a process that never saw it."""

    name: str
    prompts: tuple[str, ...]
    requires: tuple[str, ...]  # CaseView fields that must be non-empty, else the step does not apply
    values: Callable[[CaseView], dict[str, str]] = field(compare=False, repr=False)  # its first prompt's variables
    need: Callable[[CaseContext], bool] | None = field(default=None, compare=False, repr=False)
    # the reliability spot-check (seed 001): the factor putting `score` on a 0-5 view, "class" to compare
    # classes, None when the spot-check does not repeat this step
    spot_check: float | str | None = field(default=None, compare=False)
    score: Callable[[dict[str, Any]], float] = field(default=_judge_score, compare=False, repr=False)
    prompt_spec: str | None = field(default=None, repr=False)  # its own prompt (JSON), None: prompt files

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.prompt_spec is None:
            return step_named, (self.name,)  # the constant itself: its rules are code, not data
        # a defined step: with its prompt, by value (its callables are module-level, pickled by reference)
        return JudgeStep, tuple(getattr(self, f.name) for f in fields(self))

    @property
    def own_prompt(self) -> dict[str, Any] | None:
        """The prompt the step carries (a plain dict of a judge prompt's fields less `version`), or None."""
        return None if self.prompt_spec is None else json.loads(self.prompt_spec)

    def check(self, view: CaseView) -> str | None:
        """Why the step cannot apply to the case (decided without a judge), or None."""
        return next((_MISSING[f] for f in self.requires if not getattr(view, f)), None)

    def needed(self, ctx: CaseContext) -> bool:
        """Does this case need a call of this step (it applies, and nothing else already decides it)?"""
        if ctx.capture.failed or self.check(CaseView.of(ctx.case, ctx.capture, ctx.k)):
            return False
        return self.need(ctx) if self.need is not None else True

    def disagree(self, first: StepOutcome, second: StepOutcome) -> bool:
        """Spot-check: scores more than 1 point apart on a 0-5 view, or different classes (seed 001)."""
        if self.spot_check == "class":
            return first.data["class"] != second.data["class"]
        return abs(self.score(first.data) - self.score(second.data)) * float(self.spot_check) > 1


def _qa(v: CaseView) -> dict[str, str]:
    return {"question": v.question, "answer": v.answer}


def _qra(v: CaseView) -> dict[str, str]:
    return {"question": v.question, "reference": v.reference, "answer": v.answer}


def _abstention_needed(ctx: CaseContext) -> bool:
    return not ctx.case.answerable and ctx.capture.abstained is None


def _answer_labels_needed(ctx: CaseContext) -> bool:
    return not all(n in ctx.human_answer_labels for n in JUDGE_LABELS)


def _chunk_labels_needed(ctx: CaseContext) -> bool:
    def full(lab: Any) -> bool:
        return lab is not None and all(getattr(lab, n) is not None for n in CHUNK_LABELS)

    return not all(full(lab) for lab in ctx.chunk_labels)


def _conflict_label_needed(ctx: CaseContext) -> bool:
    if ctx.case.recency_conflict_rule != "acknowledge_both" or "acknowledges_conflict" in ctx.human_answer_labels:
        return False
    return bool(ctx.case.gold_supports) and all(ctx.reference_matches(i) for i in range(len(ctx.case.gold_supports)))


GROUNDEDNESS = JudgeStep(
    "groundedness",
    ("groundedness",),
    ("answer", "chunks"),
    lambda v: {"answer": v.answer, "contexts": v.contexts},
    spot_check=1.0,
)
CORRECTNESS = JudgeStep(
    "correctness", ("correctness",), ("answer", "chunks"), lambda v: {**_qa(v), "contexts": v.contexts}, spot_check=1.0
)
WP_CORRECTNESS = JudgeStep("wp_correctness", ("wp_correctness",), ("answer", "reference"), _qra, spot_check=1.0)
WP_FACT_CHECK = JudgeStep(
    "wp_fact_check",
    ("wp_fact_check",),
    ("answer", "chunks"),
    lambda v: {"answer": v.answer, "reference": v.reference or "(none)", "contexts": v.contexts},
)
WP_RELEVANCE = JudgeStep("wp_relevance", ("wp_relevance",), ("answer",), _qa, spot_check=1.0)
FAITHFULNESS = JudgeStep("faithfulness", ("extract_claims", "verify_claims"), ("answer", "chunks"), _qa)
CONTEXT_PRECISION = JudgeStep(
    "context_precision",
    ("context_precision",),
    ("reference", "chunks"),
    lambda v: {"question": v.question, "reference": v.reference, "contexts": v.contexts},
)
CONTEXT_RECALL = JudgeStep(
    "context_recall",
    ("extract_statements", "attribute_statements"),
    ("reference",),
    lambda v: {"question": v.question, "reference": v.reference},
)
ANSWER_RELEVANCE = JudgeStep("answer_relevance", ("generate_questions",), ("answer",), lambda v: {"answer": v.answer})
FACTUAL_ACCURACY = JudgeStep(
    "factual_accuracy", ("factual_accuracy",), ("answer", "reference"), _qra, spot_check=5.0, score=geval_score
)
ANSWER_CLASS = JudgeStep("answer_class", ("answer_class",), ("answer", "reference"), _qra, spot_check="class")
ABSTENTION = JudgeStep("abstention", ("abstention",), ("answer",), _qa, need=_abstention_needed)
LABEL_ANSWER = JudgeStep(
    "label_answer",
    ("label_answer",),
    ("answer",),
    lambda v: {**_qa(v), "contexts": v.contexts or "(none)"},
    need=_answer_labels_needed,
)
LABEL_CHUNKS = JudgeStep(
    "label_chunks",
    ("label_chunks",),
    ("chunks",),
    lambda v: {"question": v.question, "contexts": v.contexts},
    need=_chunk_labels_needed,
)
ACKNOWLEDGES_CONFLICT = JudgeStep(
    "acknowledges_conflict", ("acknowledges_conflict",), ("answer",), _qa, need=_conflict_label_needed
)

ALL_STEPS: tuple[JudgeStep, ...] = (
    GROUNDEDNESS,
    CORRECTNESS,
    WP_CORRECTNESS,
    WP_FACT_CHECK,
    WP_RELEVANCE,
    FAITHFULNESS,
    CONTEXT_PRECISION,
    CONTEXT_RECALL,
    ANSWER_RELEVANCE,
    FACTUAL_ACCURACY,
    ANSWER_CLASS,
    ABSTENTION,
    LABEL_ANSWER,
    LABEL_CHUNKS,
    ACKNOWLEDGES_CONFLICT,
)


# the CaseView fields a defined step may give its prompt (as variables of the same names), and the field
# each needs non-empty (`requires`: the step does not apply to a case without it)
VIEW_INPUTS = ("question", "answer", "contexts", "reference")
_REQUIRED = {"answer": "answer", "contexts": "chunks", "reference": "reference"}


@dataclass(frozen=True)
class ViewValues:
    """A defined step's variables: these fields of the CaseView, under their own names (a module-level
    callable, so that the step pickles by value)."""

    names: tuple[str, ...]

    def __call__(self, view: CaseView) -> dict[str, str]:
        return {n: getattr(view, n) for n in self.names}


def defined_step(
    name: str, prompt: Mapping[str, Any], inputs: tuple[str, ...], spot_check: float | None = None
) -> JudgeStep:
    """A step of one call of its own prompt (a plain dict: id, description, variables, system, user,
    output_schema, max_tokens; no version) reading `inputs` (VIEW_INPUTS) of the case. Not registered:
    add_step makes step_named find it."""
    wrong = [i for i in inputs if i not in VIEW_INPUTS]
    if wrong:
        raise UnknownNameError(f"input of judge step {name!r}", wrong[0], VIEW_INPUTS)
    spec = json.dumps(dict(prompt), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    requires = tuple(_REQUIRED[i] for i in inputs if i in _REQUIRED)
    return JudgeStep(
        name, (str(prompt["id"]),), requires, ViewValues(tuple(inputs)), spot_check=spot_check, prompt_spec=spec
    )


_DEFINED: dict[str, JudgeStep] = {}  # steps defined at run time (rubrics), by name


def add_step(step: JudgeStep) -> JudgeStep:
    """Make a defined step known to step_named (again: the new definition replaces the earlier one). A
    built-in step's name is refused."""
    if step.prompt_spec is None:
        raise ValueError(f"judge step {step.name!r}: add_step takes a defined step (one with its own prompt)")
    if any(s.name == step.name for s in ALL_STEPS):
        raise ConfigError(f"judge step {step.name!r} has the name of a built-in step: rename it")
    _DEFINED[step.name] = step
    return step


def step_named(name: str) -> JudgeStep:
    """The declared step called `name`: a built-in one, or one defined in this process (add_step)."""
    found = next((s for s in ALL_STEPS if s.name == name), None) or _DEFINED.get(name)
    if found is None:
        raise UnknownNameError("judge step", name, [*(s.name for s in ALL_STEPS), *_DEFINED])
    return found
