"""Honest judges (issue 14): a reply that fits the output schema but says nothing — the prompt's
example copied back, a placeholder, a schema word, an empty required text, one text repeated — is a
`parse_error` with the reason, through the gateway (one repair attempt first), from the ledger, and in
the metric that would have been built on it; real replies, enum values and legitimately empty lists
pass."""

from __future__ import annotations

import asyncio
import datetime as dt
import json

import jsonschema
import pytest

from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import JudgeGateway
from raglake.judge.honesty import degenerate_reason, example_strings
from raglake.judge.ledger import JudgeLedger, call_key
from raglake.judge.prompts import get_prompt, load_prompts
from raglake.judge.steps import Judge, run_step
from raglake.lake.calls import LakeCallStore
from raglake.lake.store import Lake
from raglake.metrics.steps import ANSWER_RELEVANCE, CaseView
from tests.fake_openai import FakeOpenAI, ok
from tests.judgekit import canned

# what SmolLM2-135M answered to generate_questions (issue 14), stored as `ok` before
SMOLLM_PLACEHOLDER = {"questions": ["...", "...", "..."]}
GROUNDED = {"score": 4, "supported_claims": ["Atlas uses Postgres 16"], "unsupported_claims": [], "reasoning": "ok"}


@pytest.mark.parametrize(
    "prompt_id, reply, why",
    [
        ("generate_questions", SMOLLM_PLACEHOLDER, "questions/0: placeholder '...'"),
        ("generate_questions", {"questions": ["…", "Where?", "When?"]}, "placeholder '…'"),
        ("generate_questions", {"questions": ["string", "string", "string"]}, "schema echo 'string'"),
        ("generate_questions", {"questions": ["<question>", "Where?", "When?"]}, "template slot '<question>'"),
        ("generate_questions", {"questions": ["What is it?", "what is it?", "What is  it?"]}, "the same text"),
        ("generate_questions", {"questions": ["question", "Where?", "When?"]}, "the field's own name"),
        ("groundedness", {**GROUNDED, "reasoning": ""}, "reasoning: empty text where content is required"),
        ("groundedness", {**GROUNDED, "reasoning": "..."}, "reasoning: placeholder"),
        ("groundedness", {**GROUNDED, "supported_claims": [""]}, "supported_claims/0: empty text"),
        ("groundedness", {**GROUNDED, "reasoning": '{"type": "string"}'}, "schema echo"),
        ("extract_claims", {"claims": ["Atlas uses Postgres.", "N/A"]}, "claims/1: schema echo 'N/A'"),
        ("correctness", {"score": 3, "reasoning": "   "}, "reasoning: empty text"),
        ("factual_accuracy", {**canned("factual_accuracy", {}), "overall_reasoning": "..."}, "overall_reasoning"),
        ("wp_fact_check", {**canned("wp_fact_check", {}), "answer_facts": [{"fact": "", "supported_by": []}]}, "fact"),
        ("answer_class", {"class": "CORRECT", "reasoning": "…"}, "reasoning: placeholder"),
        ("label_answer", {**canned("label_answer", {}), "reasoning": "..."}, "reasoning: placeholder"),
        ("abstention", {"abstained": True, "reasoning": "string"}, "reasoning: schema echo"),
    ],
)
def test_a_degenerate_reply_is_not_a_real_answer(prompt_id, reply, why):
    prompt = get_prompt(prompt_id)
    jsonschema.validate(reply, prompt.output_schema)  # it fits the schema
    problem = prompt.validate_output(reply)
    assert problem is not None and problem.startswith("not a real answer: ") and why in problem, problem


@pytest.mark.parametrize("prompt_id", sorted(load_prompts()))
def test_real_replies_pass(prompt_id):
    """Every prompt's canned reply (short texts such as "r" included) is a real answer."""
    chunks = "[1] a\n\n[2] b"
    items = "1. a\n2. b"
    assert get_prompt(prompt_id).validate_output(canned(prompt_id, {"contexts": chunks, "claims": items})) is None


def test_enum_values_empty_lists_and_optional_empty_text_are_answers():
    assert get_prompt("answer_class").validate_output({"class": "WRONG", "reasoning": ""}) is None  # optional
    assert get_prompt("answer_class").validate_output({"class": "CORRECT"}) is None
    assert get_prompt("extract_claims").validate_output({"claims": []}) is None  # an answer with no claims
    empty = {"score": 0, "supported_claims": [], "unsupported_claims": [], "reasoning": "Unrelated."}
    assert get_prompt("groundedness").validate_output(empty) is None
    assert get_prompt("label_chunks").validate_output({"chunks": []}) is None


def test_the_prompts_example_strings_are_echoes_but_enum_values_are_not():
    prompt = get_prompt("answer_class")
    echoes = example_strings((prompt.system, prompt.user), prompt.output_schema)
    assert "..." in echoes and "correct" not in echoes and "wrong" not in echoes
    schema = {"type": "object", "properties": {"note": {"type": "string"}}}
    assert "an echo of the prompt's example" in degenerate_reason(
        schema, {"note": "Write here"}, frozenset({"write here"})
    )
    assert degenerate_reason(schema, {"other": "..."}) is None  # keys beyond the schema are not read


# ---- through the gateway ----------------------------------------------------------------------------


def _gateway(url: str, lake: Lake) -> JudgeGateway:
    config = JudgeConfig(base_url=url, model="gpt-4o-mini", max_retries=0, backoff_s=0.01)
    return JudgeGateway(config, JudgeLedger(LakeCallStore(lake), run_id="r-honest"))


def _rows(lake: Lake) -> list[dict]:
    from raglake.lake.query import connect

    return connect(lake).sql("SELECT * FROM judge_calls ORDER BY created_at").to_arrow_table().to_pylist()


def test_a_placeholder_reply_is_repaired_once_then_a_parse_error_kept_in_the_ledger(tmp_path):
    lake = Lake(tmp_path / "lake")
    prompt = get_prompt("generate_questions")
    with FakeOpenAI() as server:
        server.script(ok(SMOLLM_PLACEHOLDER), ok(SMOLLM_PLACEHOLDER))
        gateway = _gateway(server.url, lake)
        result = asyncio.run(gateway.call(prompt, {"answer": "Atlas uses Postgres 16."}))
        gateway.ledger.flush()
        assert server.count == 2  # the reply, and one repair request naming the problem
        assert "not a real answer" in server.requests[1].messages[-1]["content"]
    assert result.status == "parse_error" and result.output is None
    assert "not a real answer: questions/0: placeholder '...'" in result.reason
    [row] = _rows(lake)
    assert row["status"] == "parse_error" and row["repaired"] is True
    assert json.loads(row["response"]) == SMOLLM_PLACEHOLDER  # the raw reply is kept for audit


def test_a_placeholder_repaired_into_a_real_answer_is_ok(tmp_path):
    lake = Lake(tmp_path / "lake")
    real = {"questions": ["Which database does Atlas use?", "What runs Atlas?", "Is Atlas on Postgres?"]}
    with FakeOpenAI() as server:
        server.script(ok(SMOLLM_PLACEHOLDER), ok(real))
        result = asyncio.run(_gateway(server.url, lake).call(get_prompt("generate_questions"), {"answer": "x"}))
    assert result.status == "ok" and result.output == real


def test_a_placeholder_stored_as_ok_before_is_a_parse_error_when_read_back(tmp_path):
    """The ledger re-parses stored replies: an old `ok` that was a placeholder becomes a parse_error,
    without a request (re-scoring is free and honest)."""
    lake = Lake(tmp_path / "lake")
    prompt, values = get_prompt("generate_questions"), {"answer": "Atlas uses Postgres 16."}
    params = {"temperature": 0, "seed": 0, "max_tokens": prompt.max_tokens}  # the gateway's, for this config
    key = call_key("gpt-4o-mini", prompt.key, prompt.version, params, prompt.render(values))
    now = dt.datetime.now(dt.timezone.utc)
    stored = {"call_key": key, "status": "ok", "response": json.dumps(SMOLLM_PLACEHOLDER), "created_at": now}
    LakeCallStore(lake).append([stored])
    with FakeOpenAI() as server:
        result = asyncio.run(_gateway(server.url, lake).call(prompt, values))
        assert server.count == 0
    assert result.from_ledger and result.status == "parse_error" and "placeholder" in result.reason


def test_answer_relevance_is_never_built_on_placeholder_questions(tmp_path):
    """The step gives parse_error (the metric then does too) instead of cosines of "..." questions."""
    lake = Lake(tmp_path / "lake")
    view = CaseView("c1", "Which database does Atlas use?", "Atlas uses Postgres 16.", "", (), False, None)
    with FakeOpenAI() as server:
        server.script(ok(SMOLLM_PLACEHOLDER), ok(SMOLLM_PLACEHOLDER))
        outcome = asyncio.run(run_step(Judge(_gateway(server.url, lake)), ANSWER_RELEVANCE, view))
    assert outcome.status == "parse_error" and outcome.data is None
    assert "placeholder" in outcome.reason
