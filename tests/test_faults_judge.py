"""A judge that answers HTTP 200 with something that is not a chat completion (a proxy's HTML page, a
cut-off or invalid JSON envelope, an envelope without choices or message, bytes that are not UTF-8),
or resets the connection mid-body (issue 10): the call is a judge_error with the reason, retried with
the gateway's backoff like a 5xx, the retries counted; the next good reply still works. An unexpected
exception inside one judge step is that case's judge_error, naming the exception; the stage goes on."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import numpy as np
import pytest

from raglake.judge.config import JudgeConfig, load_prices
from raglake.judge.gateway import JudgeGateway, JudgeResult
from raglake.judge.ledger import JudgeLedger
from raglake.judge.prompts import get_prompt
from raglake.lake.calls import LakeCallStore
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.judging import judge_batch
from raglake.schemas import Capture, GoldenCase
from tests.fake_openai import canned_reply, completion, ok
from tests.faultkit import (
    Answer,
    FaultServer,
    Request,
    html_page,
    json_answer,
    malformed,
    not_utf8,
    reset_mid_body,
    too_deep,
)

GROUNDED = {"score": 4, "supported_claims": ["Atlas uses Postgres 16"], "unsupported_claims": [], "reasoning": "r"}
ENVELOPE = completion(ok(GROUNDED), {"model": "gpt-4o-mini"})
CHOICE = ENVELOPE["choices"][0]
# fault -> (what the server sends, words of the reason)
FAULTS = {
    "truncated_envelope": (malformed(ENVELOPE), "malformed reply: JSONDecodeError"),
    "html_200": (html_page(), "malformed reply: the reply is not a JSON object: <!DOCTYPE html>"),
    "html_200_said_to_be_json": (html_page(content_type="application/json"), "malformed reply: JSONDecodeError"),
    "not_utf8": (not_utf8(), "malformed reply: UnicodeDecodeError"),
    "nested_too_deep": (too_deep(), "malformed reply: RecursionError"),
    "not_an_object": (json_answer([1, 2, 3]), "malformed reply: the reply is not a JSON object: [1, 2, 3]"),
    "no_choices_key": (json_answer({k: v for k, v in ENVELOPE.items() if k != "choices"}), "the reply has no choices"),
    "empty_choices": (json_answer({**ENVELOPE, "choices": []}), "malformed reply: the reply has no choices"),
    "choice_not_an_object": (json_answer({**ENVELOPE, "choices": ["x"]}), "malformed reply: the reply has no choices"),
    "no_message": (
        json_answer({**ENVELOPE, "choices": [{"index": 0, "finish_reason": "stop"}]}),
        "malformed reply: the reply has no message",
    ),
    "null_content": (
        json_answer({**ENVELOPE, "choices": [{**CHOICE, "message": {"role": "assistant", "content": None}}]}),
        "malformed reply: the message has no content",
    ),
    "reset_mid_body": (reset_mid_body(ENVELOPE), "connection error"),
}


def good(request: Request) -> Answer:
    """A valid completion for whichever prompt the request renders."""
    body = request.json()
    return json_answer(completion(canned_reply(body), body))


def values(i: int = 0) -> dict[str, str]:
    return {
        "answer": f"Atlas uses Postgres 16 (answer {i}).",
        "contexts": "[1] We run Postgres 16.\n\n[2] Other notes.",
    }


def make_gateway(server: FaultServer, lake: Lake, **settings) -> JudgeGateway:
    settings = {"backoff_s": 0.01, "max_backoff_s": 0.05, "timeout_s": 5.0, "max_retries": 2, **settings}
    config = JudgeConfig(base_url=server.url("/v1"), model="gpt-4o-mini", prices=load_prices(), **settings)
    return JudgeGateway(config, JudgeLedger(LakeCallStore(lake), run_id="r-faults"))


def ask(gateway: JudgeGateway, *calls: dict[str, str]) -> list[JudgeResult]:
    async def main() -> list[JudgeResult]:
        return [await gateway.call(get_prompt("groundedness"), v) for v in calls]

    return asyncio.run(main())


def ledger_rows(lake: Lake, gateway: JudgeGateway) -> list[dict]:
    gateway.ledger.flush()
    return connect(lake).sql("SELECT * FROM judge_calls ORDER BY created_at").to_arrow_table().to_pylist()


@pytest.fixture
def server():
    with FaultServer(good) as s:
        yield s


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_bad_reply_is_a_judge_error_after_the_retries_and_the_next_call_works(server, tmp_path: Path, fault: str):
    answer, words = FAULTS[fault]
    server.script(answer, answer, answer)  # every attempt of the first call (max_retries 2: 3 attempts)
    gw = make_gateway(server, Lake(tmp_path / "lake"))
    failed, fine = ask(gw, values(1), values(2))
    assert failed.status == "judge_error" and failed.output is None
    assert words in failed.reason and "(after 3 attempt(s))" in failed.reason, failed.reason
    assert fine.status == "ok" and fine.output == {
        "score": 4,
        "supported_claims": ["a"],
        "unsupported_claims": [],
        "reasoning": "r",
    }
    assert server.count == 4
    assert gw.stats.retries == 2 and gw.stats.calls == 4
    assert gw.stats.statuses == {"judge_error": 1, "ok": 1}
    first, second = ledger_rows(Lake(tmp_path / "lake"), gw)
    assert (first["status"], first["retries"], first["attempts"], first["error"]) == (
        "judge_error",
        2,
        3,
        failed.reason,
    )
    assert first["response"] is None
    assert (second["status"], second["retries"]) == ("ok", 0)


@pytest.mark.parametrize("fault", ["truncated_envelope", "html_200", "empty_choices", "null_content", "reset_mid_body"])
def test_one_bad_reply_then_a_good_one_is_ok_after_one_retry(server, tmp_path: Path, fault: str):
    server.script(FAULTS[fault][0])
    gw = make_gateway(server, Lake(tmp_path / "lake"))
    [result] = ask(gw, values())
    assert result.status == "ok", result.reason
    assert server.count == 2 and gw.stats.retries == 1
    [row] = ledger_rows(Lake(tmp_path / "lake"), gw)
    assert (row["status"], row["retries"], row["attempts"]) == ("ok", 1, 2)


def test_a_bad_reply_waits_the_gateways_backoff_like_a_5xx(server, tmp_path: Path):
    answer = FAULTS["html_200"][0]
    server.script(answer, answer, answer)
    gw = make_gateway(server, Lake(tmp_path / "lake"), backoff_s=0.1, max_backoff_s=1.0)
    [result] = ask(gw, values())
    assert result.status == "judge_error"
    arrivals = [r.at for r in server.requests]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(gaps) == 2
    for i, gap in enumerate(gaps):  # base * 2^i, jitter at least half of it
        assert gap >= 0.05 * 2**i, gaps


def test_content_cut_off_at_max_tokens_is_still_retried_with_a_larger_budget(server, tmp_path: Path):
    """A null content with finish_reason "length" (a model that spent its tokens before answering) is a
    truncation, not a malformed envelope: asked again once with twice the max_tokens."""
    cut = {
        **ENVELOPE,
        "choices": [{**CHOICE, "finish_reason": "length", "message": {"role": "assistant", "content": None}}],
    }
    server.script(json_answer(cut))
    gw = make_gateway(server, Lake(tmp_path / "lake"))
    [result] = ask(gw, values())
    assert result.status == "ok"
    first, second = (r.json() for r in server.requests)
    assert second["max_tokens"] == 2 * first["max_tokens"]
    assert gw.stats.retries == 0


# ---- the stage: an unexpected exception in one step --------------------------------------------


class FlakyEncoder:
    """Encodes like a model, except that any text containing "boom" raises (a broken embedder)."""

    class embedder:
        key = "fake-embedder"

    def encode(self, texts: list[str], caller: str = "") -> np.ndarray:
        if any("boom" in t for t in texts):
            raise RuntimeError("the embedder fell over")
        vectors = np.ones((len(texts), 4), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_an_unexpected_exception_in_one_step_is_that_cases_judge_error(server, tmp_path: Path):
    cases = [GoldenCase(id=f"c{i}", question=q) for i, q in enumerate(["Which db?", "Which boom?", "Which queue?"])]
    pairs = [(c, Capture(case_id=c.id, answer=f"The answer to {c.question}")) for c in cases]
    config = JudgeConfig(base_url=server.url("/v1"), model="gpt-4o-mini", backoff_s=0.01)
    batch = judge_batch(
        pairs,
        [get_metric("answer_relevance")],
        ScoringConfig(),
        config,
        str(tmp_path / "lake"),
        "r-stage-faults",
        FlakyEncoder(),
    )
    outcomes = {cid: steps["answer_relevance"] for cid, steps in batch.outcomes.items()}
    assert set(outcomes) == {"c0", "c1", "c2"}
    assert outcomes["c0"].status == outcomes["c2"].status == "ok"
    broken = outcomes["c1"]
    assert broken.status == "judge_error"
    assert "RuntimeError: the embedder fell over" in broken.reason, broken.reason
    assert "test_faults_judge.py" in broken.reason  # where it was raised: a programming error stays visible
    assert server.count == 3  # every case asked its question; only c1's step failed afterwards


def test_a_judge_answer_nested_too_deeply_is_a_parse_error(server, tmp_path: Path):
    """The envelope is fine, the judge's own text is JSON nested beyond the parser: the judge answered,
    so it is a parse_error (after the one repair), not an exception."""
    deep = "[" * 100_000 + "]" * 100_000
    server.script(json_answer(completion(ok(deep), {})), json_answer(completion(ok(deep), {})))
    gw = make_gateway(server, Lake(tmp_path / "lake"))
    [result] = ask(gw, values())
    assert result.status == "parse_error" and "nested too deeply" in result.reason, result.reason
    assert server.count == 2
