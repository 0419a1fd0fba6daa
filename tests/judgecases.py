"""Cases, captures and scripted judge answers for the judge metric tests (test_judge_metrics.py,
test_judge_labels.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.judge.gateway import JudgeResult
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Score, all_metrics, get_metric
from raglake.metrics.steps import StepOutcome
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from tests.judgekit import ScriptedGateway, canned, judge_outcomes

MODEL = "scripted-judge"
K = 3
QUESTION = "Which database does Atlas use?"
ANSWER = "Atlas uses Postgres 16 [1]."
REFERENCE = "Atlas uses Postgres 16."
CHUNKS = ("We run Postgres 16.", "Atlas launched in May.", "Billing runs on Stripe.")
JUDGE_METRICS = [m.name for m in all_metrics(level="case") if m.family == "judge"]


def case(**kw: Any) -> GoldenCase:
    data: dict[str, Any] = {"id": "c", "question": QUESTION, "reference_answer": REFERENCE}
    data.update(kw)
    return GoldenCase.model_validate(data)


def capture(*texts: str, answer: str = ANSWER, **kw: Any) -> Capture:
    data: dict[str, Any] = {
        "case_id": "c",
        "method": "m1",
        "answer": answer,
        "retrieved": [
            {"rank": i, "rel_path": f"notes/{i}.md", "heading_path": f"H{i}", "text": t}
            for i, t in enumerate(texts, start=1)
        ],
    }
    data.update(kw)
    return Capture.model_validate(data)


def script(**outputs: Any) -> Callable[[str, dict[str, Any]], Any]:
    """The judge's answer per prompt id: a dict, a JudgeResult, or a function of the values; else canned."""

    def answer(prompt_id: str, values: dict[str, Any]) -> Any:
        out = outputs.get(prompt_id)
        if callable(out) and not isinstance(out, JudgeResult):
            return out(values)
        return canned(prompt_id, values) if out is None else out

    return answer


def failure(status: str, prompt_id: str, reason: str | None = None) -> JudgeResult:
    reason = (
        reason
        or {
            "judge_error": "judge_error: HTTP 500 (after 5 attempt(s))",
            "parse_error": "parse_error: score: 9 is greater than the maximum of 5",
            "skipped": "budget",
        }[status]
    )
    return JudgeResult(status, reason=reason, model=MODEL, prompt_id=prompt_id, prompt_version=1)


def judged(
    c: GoldenCase,
    cap: Capture,
    names: list[str],
    gateway: ScriptedGateway | None = None,
    config: ScoringConfig | None = None,
    encoder: Any = None,
) -> dict[str, Score]:
    """Scores of `names` for one case, the judge steps run through the scripted gateway."""
    config = config or ScoringConfig(k=K)
    metrics = [get_metric(n) for n in names]
    outcomes = judge_outcomes([(c, cap)], metrics, config, gateway or ScriptedGateway(model=MODEL), encoder)[c.id]
    ctx = CaseContext(c, cap, config, judge=outcomes)
    return {m.name: s for m, s in score_context(ctx, metrics)}


def scored(
    c: GoldenCase,
    cap: Capture,
    names: list[str],
    judge: dict[str, StepOutcome] | None,
    config: ScoringConfig | None = None,
) -> dict[str, Score]:
    """Scores from hand-built step outcomes (judge=None: no judge configured)."""
    ctx = CaseContext(c, cap, config or ScoringConfig(k=K), judge=judge)
    return {m.name: s for m, s in score_context(ctx, [get_metric(n) for n in names])}


def done(data: dict[str, Any], prompt_id: str = "p", model: str = MODEL) -> StepOutcome:
    return StepOutcome("ok", data, model=model, prompt_id=prompt_id, prompt_version=1)


def assert_ok(s: Score, expected: float, tol: float = 1e-9) -> None:
    assert s.status == "ok", (s.status, s.reason)
    assert s.value == pytest.approx(expected, abs=tol), s


def assert_nan(s: Score, status: str, reason: str | None = None) -> None:
    assert s.status == status, (s.status, s.reason)
    assert math.isnan(s.value), s.value
    assert s.reason, "a non-ok score carries a reason"
    if reason is not None:
        assert s.reason == reason


def asked(gw: ScriptedGateway) -> list[str]:
    return [pid for pid, _ in gw.calls]


def fact_check(
    answer_facts: list[list[int]],
    chunks_used: list[int],
    indistinct: bool = False,
    reference_facts: list[list[int]] = (),
) -> dict[str, Any]:
    return {
        "answer_facts": [{"fact": f"a{i}", "supported_by": s} for i, s in enumerate(answer_facts)],
        "answer_is_indistinct": indistinct,
        "reference_facts": [{"fact": f"r{i}", "supported_by": s} for i, s in enumerate(reference_facts)],
        "chunks_used": chunks_used,
    }


def verdicts(*v: int) -> Callable[[dict], dict]:
    return lambda values: {"verdicts": [{"claim": i, "verdict": x} for i, x in enumerate(v, start=1)]}


def relevance(*flags: bool) -> Callable[[dict], dict]:
    return lambda values: {"verdicts": [{"chunk": i, "is_relevant": f} for i, f in enumerate(flags, start=1)]}


def attributions(*a: int) -> Callable[[dict], dict]:
    return lambda values: {"attributions": [{"statement": i, "attributed": x} for i, x in enumerate(a, start=1)]}


GENERATED = ["What database backs Atlas?", "Which Postgres version?", "When did Atlas launch?"]


def unit(*v: float) -> np.ndarray:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


VECTORS = {
    QUESTION: unit(1, 0, 0),
    GENERATED[0]: unit(1, 0, 0),
    GENERATED[1]: unit(0.6, 0.8, 0),
    GENERATED[2]: unit(0, 1, 0),
}


class StubEmbedder:
    key, dimension = "stub@0", 3

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts) -> np.ndarray:
        self.encoded += list(texts)
        return np.stack([VECTORS[t] for t in texts])


SEED_002 = dict(
    wp_correctness={"score": 3, "reasoning": "partly aligned"},
    wp_relevance={"score": 4, "reasoning": "addresses it"},
    # two answer facts, both supported (faithfulness 1.0, recall 1.0); 2 of the 3 chunks used (precision 2/3)
    wp_fact_check=fact_check([[1], [2]], [1, 2], reference_facts=[[1]]),
)


FOUR = CHUNKS + ("Atlas moved to Postgres in 2024.",)


def stub_encoder() -> TextEncoder:
    stub = StubEmbedder()
    return TextEncoder(stub, EmbeddingCache(None, stub.key))  # type: ignore[arg-type]


RAGAS_PARTS = dict(
    extract_claims={"claims": ["c1", "c2", "c3"]},
    verify_claims=verdicts(1, 0, 1),  # faithfulness 2/3
    context_precision=relevance(False, True, True, False),  # 0.5
    extract_statements={"statements": ["s1", "s2", "s3"]},
    attribute_statements=attributions(1, 1, 0),  # 2/3
    generate_questions={"questions": GENERATED},  # 0.5333
)
