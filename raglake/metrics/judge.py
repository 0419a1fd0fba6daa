"""LLM-judged metrics (METRICS.md §5; seeds 001, 002, 004). Each reads the outcomes of the judge
steps of its case (raglake.judge.steps); a judge that failed gives judge_error / parse_error, no judge
gives `skipped` (reason no_judge), a case the metric does not apply to gives `undefined`."""

from __future__ import annotations

import math
from collections.abc import Callable

from raglake.judge.steps import STEPS, CaseView, StepOutcome, mean_cosine
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, register


def outcome(ctx: CaseContext, step: str) -> StepOutcome:
    """The step's outcome, or why there is none: not applicable (undefined) or no judge (skipped)."""
    reason = STEPS[step].check(CaseView.of(ctx.case, ctx.capture, ctx.k))
    if reason:
        return StepOutcome.undefined(reason)
    if ctx.judge is None:
        return StepOutcome("skipped", reason="no_judge")
    return ctx.judge.get(step) or StepOutcome("skipped", reason="not_judged")


def prompt_refs(steps: list[str]) -> tuple[str, str]:
    """("p1+p2", "v1+v2"): every prompt a metric's steps use, with versions, as the score rows record them
    (re-scoring compares these with the current prompt files)."""
    from raglake.judge.prompts import get_prompt

    prompts = sorted({p for step in steps for p in STEPS[step].prompts})
    return "+".join(prompts), "+".join(str(get_prompt(p).version) for p in prompts)


def metric_steps(metric_name: str) -> list[str]:
    from raglake.metrics.registry import get_metric

    return sorted(i.split(":", 1)[1] for i in get_metric(metric_name).inputs if i.startswith("judge:"))


def _meta(o: StepOutcome, step: str) -> dict[str, str | None]:
    ids, versions = prompt_refs([step])
    return {"judge_model": o.model, "prompt_id": ids, "prompt_version": versions, "judge_call": o.call_key}


def from_step(ctx: CaseContext, step: str, value: Callable[[dict], float | Score]) -> Score:
    o = outcome(ctx, step)
    if o.status != "ok":
        return Score.failed(o.status, o.reason, **_meta(o, step))
    v = value(o.data)
    if isinstance(v, Score):
        return Score(v.value, v.status, v.reason, **_meta(o, step))
    return Score.ok(v, **_meta(o, step))


def _judge(name: str, step: str, scale: str, seed: str, better: bool | None = True, extra: tuple[str, ...] = ()):
    return register(name, family="judge", scale=scale, higher_is_better=better, seed=seed,
                    inputs=(f"judge:{step}", *extra))


@_judge("groundedness", "groundedness", "0-5", "001")
def groundedness(ctx: CaseContext) -> Score:
    """0-5: are all claims supported by the top-K chunks (and the major ones cited)?"""
    return from_step(ctx, "groundedness", lambda d: d["score"])


@_judge("correctness", "correctness", "0-5", "001")
def correctness(ctx: CaseContext) -> Score:
    """0-5: does the answer correctly address the question, given the chunks?"""
    return from_step(ctx, "correctness", lambda d: d["score"])


@_judge("wp_correctness", "wp_correctness", "1-5", "002")
def wp_correctness(ctx: CaseContext) -> Score:
    """1-5: factual alignment of the answer with the reference."""
    return from_step(ctx, "wp_correctness", lambda d: d["score"])


@_judge("wp_relevance", "wp_relevance", "1-5", "002")
def wp_relevance(ctx: CaseContext) -> Score:
    """1-5: does the answer address the question's intent?"""
    return from_step(ctx, "wp_relevance", lambda d: d["score"])


def _share(items: list, keep: Callable[[dict], bool], empty_reason: str) -> float | Score:
    return Score.undefined(empty_reason) if not items else sum(1 for i in items if keep(i)) / len(items)


def _wp(ctx: CaseContext, value: Callable[[dict], float | Score], no_chunks: Score) -> Score:
    if not ctx.capture.answer.strip():
        return Score.undefined("empty_answer")
    if not [c for c in ctx.top if c.text.strip()]:
        return no_chunks
    return from_step(ctx, "wp_fact_check", value)


@_judge("wp_faithfulness", "wp_fact_check", "0-1", "002")
def wp_faithfulness(ctx: CaseContext) -> Score:
    """Supported facts / facts in the answer; no chunks → 1.0 (reason no_context); 1-5 view = 1 + 4x."""
    return _wp(ctx, lambda d: _share(d["answer_facts"], lambda f: bool(f["supported_by"]), "no_facts"),
               Score.ok(1.0, reason="no_context"))


@_judge("wp_precision", "wp_fact_check", "0-1", "002")
def wp_precision(ctx: CaseContext) -> Score:
    """Chunks the answer uses / chunks retrieved; no chunks → undefined."""
    n = len([c for c in ctx.top if c.text.strip()])
    return _wp(ctx, lambda d: len({i for i in d["chunks_used"] if 1 <= i <= n}) / n, Score.undefined("no_chunks"))


@_judge("wp_recall", "wp_fact_check", "0-1", "002")
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


@_judge("wp_composite", "wp_fact_check", "1-5", "002", extra=("judge:wp_correctness", "judge:wp_relevance"))
def wp_composite(ctx: CaseContext) -> Score:
    """0.4·correctness + 0.2·faithfulness + 0.2·precision + 0.2·recall + 0·relevance on the 1-5 view."""
    parts = {"correctness": wp_correctness(ctx), "faithfulness": wp_faithfulness(ctx), "precision": wp_precision(ctx),
             "recall": wp_recall(ctx), "relevance": wp_relevance(ctx)}
    return _composite(weighted(parts, ctx.config.wp_weights, {"faithfulness": _one_to_five, "precision": _one_to_five,
                                                              "recall": _one_to_five}), parts, "wp_composite")


@_judge("faithfulness", "faithfulness", "0-1", "004")
def faithfulness(ctx: CaseContext) -> Score:
    """Claims of the answer supported by the chunks / claims; no claims → 1.0."""
    def value(d: dict) -> float | Score:
        return Score.ok(1.0, reason="no_claims") if not d["claims"] else sum(d["supported"]) / len(d["supported"])

    return from_step(ctx, "faithfulness", value)


@_judge("context_precision", "context_precision", "0-1", "004")
def context_precision(ctx: CaseContext) -> Score:
    """Mean of the per-chunk relevance verdicts (question + ground truth)."""
    return from_step(ctx, "context_precision", lambda d: sum(v["is_relevant"] for v in d["chunks"]) / len(d["chunks"]))


def average_precision(relevant: list[bool]) -> float:
    """Σ_k precision@k · rel_k / Σ rel_k (RAGAS' rank-weighted context precision); 0 when none is relevant."""
    hits, total = 0, 0.0
    for k, rel in enumerate(relevant, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


@_judge("context_precision_ap", "context_precision", "0-1", "004")
def context_precision_ap(ctx: CaseContext) -> Score:
    """Rank-weighted context precision: average precision of the relevance verdicts."""
    return from_step(ctx, "context_precision", lambda d: average_precision([v["is_relevant"] for v in d["chunks"]]))


@_judge("context_recall", "context_recall", "0-1", "004")
def context_recall(ctx: CaseContext) -> Score:
    """Reference statements attributable to the chunks / statements; none → 1.0; no chunks → 0."""
    def value(d: dict) -> float | Score:
        if not d["statements"]:
            return Score.ok(1.0, reason="no_statements")
        return sum(d["attributed"]) / len(d["attributed"])

    return from_step(ctx, "context_recall", value)


@_judge("answer_relevance", "answer_relevance", "cosine", "004", extra=("vectors",))
def answer_relevance(ctx: CaseContext) -> Score:
    """Mean cos(question, generated question) over the 3 questions the judge writes from the answer."""
    if ctx.capture.answer.strip() and ctx.abstained:
        return Score.undefined("abstained")
    o = outcome(ctx, "answer_relevance")
    if o.status != "ok":
        return Score.failed(o.status, o.reason, **_meta(o, "answer_relevance"))
    if not o.data["cosines"]:
        return Score.failed("parse_error", "parse_error: no questions generated", **_meta(o, "answer_relevance"))
    return Score.ok(mean_cosine(o), model=o.data["embedder"], **_meta(o, "answer_relevance"))


@_judge("ragas_score", "faithfulness", "0-1", "004",
        extra=("judge:context_precision", "judge:context_recall", "judge:answer_relevance", "vectors"))
def ragas_score(ctx: CaseContext) -> Score:
    """0.3·faithfulness + 0.2·context_precision + 0.2·context_recall + 0.3·answer_relevance, renormalised over non-NaN."""
    parts = {"faithfulness": faithfulness(ctx), "context_precision": context_precision(ctx),
             "context_recall": context_recall(ctx), "answer_relevance": answer_relevance(ctx)}
    return _composite(weighted(parts, ctx.config.ragas_weights, {}), parts, "ragas_score")


def _composite(score: Score, parts: dict[str, Score], name: str) -> Score:
    """A composite row records the judge model of its components and every prompt they use."""
    ids, versions = prompt_refs(metric_steps(name))
    model = next((p.judge_model for p in parts.values() if p.judge_model), None)
    return Score(score.value, score.status, score.reason, model=score.model, judge_model=model, prompt_id=ids,
                 prompt_version=versions)


@_judge("factual_accuracy", "factual_accuracy", "0-1", "004")
def factual_accuracy(ctx: CaseContext) -> Score:
    """GEval: (0.5·correctness + 0.3·completeness + 0.2·consistency) / 100; grade A ≥ .8, B ≥ .6, C ≥ .4, D ≥ .2, else E."""
    return from_step(ctx, "factual_accuracy", lambda d: (0.5 * d["correctness"]["score"] + 0.3 * d["completeness"]["score"]
                                                         + 0.2 * d["consistency"]["score"]) / 100)


def _answer_class(name: str, cls: str, better: bool) -> None:
    def fn(ctx: CaseContext) -> Score:
        return from_step(ctx, "answer_class", lambda d: float(d["class"] == cls))

    fn.__doc__ = f"1 if the answer's class is {cls} (uncertainty phrases → DON'T KNOW, else the judge: CORRECT/WRONG)."
    fn.__name__ = name
    _judge(name, "answer_class", "binary", "004", better)(fn)


for _name, _cls, _better in (("answer_class_correct", "CORRECT", True), ("answer_class_wrong", "WRONG", False),
                             ("answer_class_dont_know", "DON'T KNOW", None)):
    _answer_class(_name, _cls, _better)


def grade(value: float) -> str:
    """factual_accuracy's letter grade (the SQL view `factual_accuracy_grades` applies the same cut-offs)."""
    if math.isnan(value):
        return "–"
    return next(g for g, cut in (("A", 0.8), ("B", 0.6), ("C", 0.4), ("D", 0.2), ("E", -1.0)) if value >= cut)
