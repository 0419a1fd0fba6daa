"""LLM-judged metrics (METRICS.md §5; seeds 001, 002, 004). Each reads the outcomes of the judge
steps of its case (declared in raglake.metrics.steps, run by the judge layer); a judge that failed gives
judge_error / parse_error, no judge gives `skipped` (reason no_judge), a case the metric does not apply
to gives `undefined`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, register
from raglake.metrics.steps import (
    ANSWER_CLASS,
    ANSWER_RELEVANCE,
    CONTEXT_PRECISION,
    CONTEXT_RECALL,
    CORRECTNESS,
    FACTUAL_ACCURACY,
    FAITHFULNESS,
    GROUNDEDNESS,
    WP_CORRECTNESS,
    WP_FACT_CHECK,
    WP_RELEVANCE,
    CaseView,
    JudgeStep,
    StepOutcome,
    geval_score,
)


def outcome(ctx: CaseContext, step: JudgeStep) -> StepOutcome:
    """The step's outcome, or why there is none: not applicable (undefined) or no judge (skipped)."""
    reason = step.check(CaseView.of(ctx.case, ctx.capture, ctx.k))
    if reason:
        return StepOutcome.undefined(reason)
    if ctx.judge is None:
        return StepOutcome("skipped", reason="no_judge")
    return ctx.judge.get(step.name) or StepOutcome("skipped", reason="not_judged")


def from_step(ctx: CaseContext, step: JudgeStep, value: Callable[[dict], float | Score]) -> Score:
    o = outcome(ctx, step)
    if o.status != "ok":
        return Score.failed(o.status, o.reason, **o.judge_meta())
    v = value(o.data)
    if isinstance(v, Score):
        return Score(v.value, v.status, v.reason, **o.judge_meta())
    return Score.ok(v, **o.judge_meta())


def mean_cosine(o: StepOutcome) -> float:
    return float(np.mean(o.data["cosines"])) if o.data and o.data.get("cosines") else float("nan")


# version 2: a schema-valid reply that is no real answer (placeholders, schema echoes, empty required
# text: raglake.judge.honesty) is a parse_error, no longer a value
JUDGE_VERSION = "2"
WP_VIEW = "wp_scores_1_5"  # sql/views/41_wp_scores_1_5.sql: the white paper's 1-5 presentation


def _judge(
    name: str,
    steps: Sequence[JudgeStep],
    scale: str,
    seed: str,
    better: bool | None = True,
    inputs: tuple[str, ...] = (),
    scale_view: str | None = None,
    **shown: bool,
):
    return register(
        name,
        family="judge",
        scale=scale,
        higher_is_better=better,
        seed=seed,
        version=JUDGE_VERSION,
        inputs=inputs,
        steps=tuple(steps),
        scale_view=scale_view,
        **shown,
    )


@_judge("groundedness", [GROUNDEDNESS], "0-5", "001", headline=True, yardsticks=("support",))
def groundedness(ctx: CaseContext) -> Score:
    """0-5: are all claims supported by the top-K chunks (and the major ones cited)?"""
    return from_step(ctx, GROUNDEDNESS, lambda d: d["score"])


@_judge("correctness", [CORRECTNESS], "0-5", "001", headline=True, worst_cases=True)
def correctness(ctx: CaseContext) -> Score:
    """0-5: does the answer correctly address the question, given the chunks?"""
    return from_step(ctx, CORRECTNESS, lambda d: d["score"])


@_judge("wp_correctness", [WP_CORRECTNESS], "1-5", "002", scale_view=WP_VIEW, yardsticks=("correctness",))
def wp_correctness(ctx: CaseContext) -> Score:
    """1-5: factual alignment of the answer with the reference."""
    return from_step(ctx, WP_CORRECTNESS, lambda d: d["score"])


@_judge("wp_relevance", [WP_RELEVANCE], "1-5", "002", scale_view=WP_VIEW)
def wp_relevance(ctx: CaseContext) -> Score:
    """1-5: does the answer address the question's intent?"""
    return from_step(ctx, WP_RELEVANCE, lambda d: d["score"])


def _share(items: list, keep: Callable[[dict], bool], empty_reason: str) -> float | Score:
    return Score.undefined(empty_reason) if not items else sum(1 for i in items if keep(i)) / len(items)


def _wp(ctx: CaseContext, value: Callable[[dict], float | Score], no_chunks: Score) -> Score:
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if not [c for c in ctx.top if c.text.strip()]:
        return no_chunks
    return from_step(ctx, WP_FACT_CHECK, value)


@_judge("wp_faithfulness", [WP_FACT_CHECK], "0-1", "002", scale_view=WP_VIEW, yardsticks=("support",))
def wp_faithfulness(ctx: CaseContext) -> Score:
    """Supported facts / facts in the answer; no chunks → 1.0 (reason no_context); 1-5 view = 1 + 4x."""
    return _wp(
        ctx,
        lambda d: _share(d["answer_facts"], lambda f: bool(f["supported_by"]), "no_facts"),
        Score.ok(1.0, reason="no_context"),
    )


@_judge("wp_precision", [WP_FACT_CHECK], "0-1", "002", scale_view=WP_VIEW)
def wp_precision(ctx: CaseContext) -> Score:
    """Chunks the answer uses / chunks retrieved; no chunks → undefined."""
    n = len([c for c in ctx.top if c.text.strip()])
    return _wp(ctx, lambda d: len({i for i in d["chunks_used"] if 1 <= i <= n}) / n, Score.undefined("no_chunks"))


@_judge("wp_recall", [WP_FACT_CHECK], "0-1", "002", scale_view=WP_VIEW)
def wp_recall(ctx: CaseContext) -> Score:
    """Facts covered by the chunks / facts (the reference's when the answer is indistinct); no chunks → 1.0."""

    def value(d: dict) -> float | Score:
        facts = d["reference_facts"] if d["answer_is_indistinct"] else d["answer_facts"]
        return _share(facts, lambda f: bool(f["supported_by"]), "no_facts")

    return _wp(ctx, value, Score.ok(1.0, reason="no_context"))


_SEVERITY = ("judge_error", "parse_error", "skipped")
_RUN_LEVEL_REASONS = ("no_judge",)


def weighted(parts: dict[str, Score], weights: dict[str, float], view: dict[str, Callable[[float], float]]) -> Score:
    """Σ w·x over the components, the weights renormalised over those that are defined (NaN
    renormalisation). A component the judge failed or skipped makes the composite fail the same way:
    a composite never quietly leaves out a component it could not get."""
    weighted_parts = {k: s for k, s in parts.items() if weights.get(k, 0) > 0}
    for status in _SEVERITY:
        failed = [(k, s) for k, s in weighted_parts.items() if s.status == status]
        if failed:
            reason = failed[0][1].reason
            # no judge configured is run-wide: the bare reason groups in SQL; others name the component
            return Score.failed(status, reason if reason in _RUN_LEVEL_REASONS else f"{failed[0][0]}: {reason}")
    usable = {k: s for k, s in weighted_parts.items() if s.status == "ok"}
    if not usable:
        return Score.undefined("no_components")
    total = sum(weights[k] for k in usable)
    value = sum(weights[k] / total * view.get(k, lambda x: x)(s.value) for k, s in usable.items())
    missing = sorted(k for k in parts if k not in usable and weights.get(k, 0) > 0)
    return Score.ok(value, reason=f"renormalised_without:{','.join(missing)}" if missing else None)


def _one_to_five(x: float) -> float:
    return 1 + 4 * x


@_judge("wp_composite", [WP_FACT_CHECK, WP_CORRECTNESS, WP_RELEVANCE], "1-5", "002", scale_view=WP_VIEW)
def wp_composite(ctx: CaseContext) -> Score:
    """0.4·correctness + 0.2·faithfulness + 0.2·precision + 0.2·recall + 0·relevance on the 1-5 view."""
    parts = {
        "correctness": wp_correctness(ctx),
        "faithfulness": wp_faithfulness(ctx),
        "precision": wp_precision(ctx),
        "recall": wp_recall(ctx),
        "relevance": wp_relevance(ctx),
    }
    return _composite(
        weighted(
            parts,
            ctx.config.wp_weights,
            {"faithfulness": _one_to_five, "precision": _one_to_five, "recall": _one_to_five},
        ),
        parts,
    )


@_judge("faithfulness", [FAITHFULNESS], "0-1", "004", headline=True, worst_cases=True, yardsticks=("support",))
def faithfulness(ctx: CaseContext) -> Score:
    """Claims of the answer supported by the chunks / claims; no claims → 1.0."""

    def value(d: dict) -> float | Score:
        return Score.ok(1.0, reason="no_claims") if not d["claims"] else sum(d["supported"]) / len(d["supported"])

    return from_step(ctx, FAITHFULNESS, value)


@_judge("context_precision", [CONTEXT_PRECISION], "0-1", "004", headline=True)
def context_precision(ctx: CaseContext) -> Score:
    """Mean of the per-chunk relevance verdicts (question + ground truth)."""
    return from_step(ctx, CONTEXT_PRECISION, lambda d: sum(v["is_relevant"] for v in d["chunks"]) / len(d["chunks"]))


def average_precision(relevant: list[bool]) -> float:
    """Σ_k precision@k · rel_k / Σ rel_k (RAGAS' rank-weighted context precision); 0 when none is relevant."""
    hits, total = 0, 0.0
    for k, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


@_judge("context_precision_ap", [CONTEXT_PRECISION], "0-1", "004")
def context_precision_ap(ctx: CaseContext) -> Score:
    """Rank-weighted context precision: average precision of the relevance verdicts."""
    return from_step(ctx, CONTEXT_PRECISION, lambda d: average_precision([v["is_relevant"] for v in d["chunks"]]))


@_judge("context_recall", [CONTEXT_RECALL], "0-1", "004", headline=True)
def context_recall(ctx: CaseContext) -> Score:
    """Reference statements attributable to the chunks / statements; none → 1.0; no chunks → 0."""

    def value(d: dict) -> float | Score:
        if not d["statements"]:
            return Score.ok(1.0, reason="no_statements")
        return sum(d["attributed"]) / len(d["attributed"])

    return from_step(ctx, CONTEXT_RECALL, value)


@_judge("answer_relevance", [ANSWER_RELEVANCE], "cosine", "004", inputs=("vectors",), headline=True)
def answer_relevance(ctx: CaseContext) -> Score:
    """Mean cos(question, generated question) over the 3 questions the judge writes from the answer."""
    if ctx.capture.answer.strip() and ctx.abstained:
        return Score.undefined("abstained")
    o = outcome(ctx, ANSWER_RELEVANCE)
    if o.status != "ok":
        return Score.failed(o.status, o.reason, **o.judge_meta())
    if not o.data["cosines"]:
        return Score.failed("parse_error", "parse_error: no questions generated", **o.judge_meta())
    return Score.ok(mean_cosine(o), model=o.data["embedder"], **o.judge_meta())


@_judge(
    "ragas_score",
    [FAITHFULNESS, CONTEXT_PRECISION, CONTEXT_RECALL, ANSWER_RELEVANCE],
    "0-1",
    "004",
    inputs=("vectors",),
)
def ragas_score(ctx: CaseContext) -> Score:
    """0.3·faithfulness + 0.2·context_precision + 0.2·context_recall + 0.3·answer_relevance, renormalised over non-NaN."""  # noqa: E501
    parts = {
        "faithfulness": faithfulness(ctx),
        "context_precision": context_precision(ctx),
        "context_recall": context_recall(ctx),
        "answer_relevance": answer_relevance(ctx),
    }
    return _composite(weighted(parts, ctx.config.ragas_weights, {}), parts)


def _composite(score: Score, parts: dict[str, Score]) -> Score:
    """A composite row records the judge model of its components and every prompt their calls used."""
    refs = sorted(
        {
            ref
            for p in parts.values()
            if p.prompt_id and p.prompt_version
            for ref in zip(p.prompt_id.split("+"), p.prompt_version.split("+"))
        }
    )
    model = next((p.judge_model for p in parts.values() if p.judge_model), None)
    return Score(
        score.value,
        score.status,
        score.reason,
        model=score.model,
        judge_model=model,
        prompt_id="+".join(i for i, _ in refs) or None,
        prompt_version="+".join(v for _, v in refs) or None,
    )


@_judge(
    "factual_accuracy",
    [FACTUAL_ACCURACY],
    "0-1",
    "004",
    scale_view="factual_accuracy_grades",  # sql/views/40_factual_accuracy_grades.sql
    headline=True,
    worst_cases=True,
    yardsticks=("correctness",),  # raglake metaeval
)
def factual_accuracy(ctx: CaseContext) -> Score:
    """GEval: (0.5·correctness + 0.3·completeness + 0.2·consistency) / 100; grade A ≥ .8, B ≥ .6, C ≥ .4, D ≥ .2, else E."""  # noqa: E501
    return from_step(ctx, FACTUAL_ACCURACY, geval_score)


def _answer_class(name: str, cls: str, better: bool) -> None:
    def fn(ctx: CaseContext) -> Score:
        return from_step(ctx, ANSWER_CLASS, lambda d: float(d["class"] == cls))

    fn.__doc__ = f"1 if the answer's class is {cls} (uncertainty phrases → DON'T KNOW, else the judge: CORRECT/WRONG)."
    fn.__name__ = name
    yardsticks = ("correctness",) if cls == "CORRECT" else ()  # raglake metaeval: CORRECT vs WRONG / DON'T KNOW
    _judge(name, [ANSWER_CLASS], "binary", "004", better, headline=better is True, yardsticks=yardsticks)(fn)


for _name, _cls, _better in (
    ("answer_class_correct", "CORRECT", True),
    ("answer_class_wrong", "WRONG", False),
    ("answer_class_dont_know", "DON'T KNOW", None),
):
    _answer_class(_name, _cls, _better)


def grade(value: float) -> str:
    """factual_accuracy's letter grade (the SQL view `factual_accuracy_grades` applies the same cut-offs)."""
    if math.isnan(value):
        return "–"
    return next(g for g, cut in (("A", 0.8), ("B", 0.6), ("C", 0.4), ("D", 0.2), ("E", -1.0)) if value >= cut)
