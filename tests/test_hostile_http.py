"""An adversarial HTTP service, as an http target and as a judge (issue 25): a body dripped a byte at a time
ends at the attempt's deadline (connect + headers + body, not each read); a gzip bomb or an endless body
stops at the response-size cap, counted after decompression, as that case's recorded failure; a redirect
is not followed and says so (it was reported as malformed JSON)."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from pathlib import Path

import pytest

from raglake.httpedge import JUDGE_MAX_RESPONSE_BYTES, TARGET_MAX_RESPONSE_BYTES
from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import JudgeGateway, JudgeResult
from raglake.judge.ledger import JudgeLedger
from raglake.judge.prompts import get_prompt
from raglake.lake.calls import LakeCallStore
from raglake.lake.store import Lake
from raglake.schemas import Capture
from raglake.targets.http_client import capture_all
from raglake.targets.http_config import load_http_config
from tests.fake_openai import completion, ok
from tests.faultkit import Answer, FaultServer, Request, golden_cases, service_body, service_config

GROUNDED = {"score": 4, "supported_claims": ["x"], "unsupported_claims": [], "reasoning": "r"}
ENVELOPE = json.dumps(completion(ok(GROUNDED), {"model": "gpt-4o-mini"})).encode()
MiB = 2**20
# 50 MB of zeros, gzip'd to ~50 KB; sent 400 times over as gzip members of one body (RFC 1952): 20 GB
# decoded from 20 MB sent, more than the loopback's socket buffers hold, so a client that stops reading
# at its cap stops the server sending
BOMB_MEMBER = gzip.compress(b"0" * 50_000_000, compresslevel=9)
BOMB_MEMBERS = 400


def bomb() -> Answer:
    return Answer(BOMB_MEMBER, repeat=BOMB_MEMBERS, headers=(("Content-Encoding", "gzip"),))


def redirect() -> Answer:
    return Answer(b"", status=302, content_type="text/plain", headers=(("Location", "http://elsewhere.invalid/x"),))


def dripping(body: bytes) -> Answer:
    return Answer(body, drip_s=0.05)  # 20 bytes a second


# ---- the http target ---------------------------------------------------------------------------------


def capture_one(answer: Answer, tmp_path: Path, **config: object) -> tuple[Capture, FaultServer, float]:
    with FaultServer(lambda request: answer) as server:
        cfg = load_http_config(service_config(tmp_path, server.port, **{"retries": 0, **config}))
        start = time.monotonic()
        [capture] = asyncio.run(capture_all(cfg, golden_cases(["c1"]), 5))
        return capture, server, time.monotonic() - start


def test_a_dripping_body_ends_at_the_attempts_deadline_not_per_read(tmp_path: Path) -> None:
    body = json.dumps(service_body("c1")).encode()  # ~150 bytes at 20 a second: ~8 s, each read well in time
    capture, server, took = capture_one(dripping(body), tmp_path, timeout_s=1)
    assert server.count == 1
    assert capture.status == "timeout" and "no response within 1 s" in capture.error
    assert took < 4, f"the attempt ran {took:.1f} s past a 1 s deadline"


def test_a_dripping_body_is_retried_each_attempt_under_its_own_deadline(tmp_path: Path) -> None:
    body = json.dumps(service_body("c1")).encode()
    capture, server, took = capture_one(dripping(body), tmp_path, timeout_s=1, retries=1, backoff_s=0.01)
    assert server.count == 2 and capture.status == "timeout" and capture.attempts == 2
    assert took < 8


def test_a_gzip_bomb_stops_at_the_response_size_cap(tmp_path: Path) -> None:
    capture, server, _ = capture_one(bomb(), tmp_path, max_response_bytes=MiB)
    assert capture.status == "error" and capture.attempts == 1 and server.count == 1  # not retried
    assert f"the response exceeded {MiB} bytes" in capture.error
    # reading stopped at the cap: the server could not send the whole (compressed) body
    assert server.wait_sent(1)[0] < len(BOMB_MEMBER) * BOMB_MEMBERS


def test_an_endless_plain_body_stops_at_the_cap(tmp_path: Path) -> None:
    endless = Answer(b"0" * MiB, repeat=200)  # promises 200 MiB
    capture, server, _ = capture_one(endless, tmp_path, max_response_bytes=MiB)
    assert capture.status == "error" and f"the response exceeded {MiB} bytes" in capture.error
    assert server.wait_sent(1)[0] < 50 * MiB


def test_a_compressed_body_under_the_cap_is_read_as_before(tmp_path: Path) -> None:
    body = json.dumps(service_body("c1")).encode()
    for name, data in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body))):
        capture, _, _ = capture_one(Answer(data, headers=(("Content-Encoding", name),)), tmp_path)
        assert capture.status == "ok" and capture.answer == "answer to c1", name


def test_the_cap_has_a_documented_default_and_is_configurable(tmp_path: Path) -> None:
    assert TARGET_MAX_RESPONSE_BYTES == 32 * MiB
    assert load_http_config(service_config(tmp_path, 1)).max_response_bytes == 32 * MiB
    with pytest.raises(Exception, match="max_response_bytes"):
        load_http_config(service_config(tmp_path, 1, max_response_bytes=0))


def test_a_redirect_is_not_followed_and_says_so(tmp_path: Path) -> None:
    capture, server, _ = capture_one(redirect(), tmp_path)
    assert server.count == 1 and capture.attempts == 1
    assert capture.status == "error"
    assert "the server answered 302 (redirect to http://elsewhere.invalid/x, not followed)" in capture.error
    assert "malformed" not in capture.error


# ---- the judge -----------------------------------------------------------------------------------------


def judge_once(answer: Answer, tmp_path: Path, **settings: object) -> tuple[JudgeResult, FaultServer, float]:
    def respond(request: Request) -> Answer:
        return answer

    with FaultServer(respond) as server:
        config = JudgeConfig(
            base_url=server.url("/v1"), model="gpt-4o-mini", **{"max_retries": 0, "timeout_s": 5.0, **settings}
        )
        gateway = JudgeGateway(config, JudgeLedger(LakeCallStore(Lake(tmp_path / "lake")), run_id="r-hostile"))
        values = {"answer": "Atlas uses Postgres.", "contexts": "[1] Atlas runs Postgres."}
        start = time.monotonic()
        result = asyncio.run(gateway.call(get_prompt("groundedness"), values))
        return result, server, time.monotonic() - start


def test_a_judge_dripping_its_reply_ends_at_the_attempts_deadline(tmp_path: Path) -> None:
    result, server, took = judge_once(dripping(ENVELOPE), tmp_path, timeout_s=1.0)
    assert server.count == 1
    assert result.status == "judge_error" and "no reply within 1 s" in result.reason
    assert took < 4, f"the call ran {took:.1f} s past a 1 s deadline"


def test_a_judges_gzip_bomb_stops_at_the_cap_and_is_not_retried(tmp_path: Path) -> None:
    result, server, _ = judge_once(bomb(), tmp_path, max_response_bytes=MiB, max_retries=2, backoff_s=0.01)
    assert result.status == "judge_error" and f"the response exceeded {MiB} bytes" in result.reason
    assert server.count == 1  # the same request would get the same bomb
    assert server.wait_sent(1)[0] < len(BOMB_MEMBER) * BOMB_MEMBERS


def test_the_judges_cap_has_a_documented_default() -> None:
    assert JudgeConfig(base_url="http://127.0.0.1:1/v1", model="m").max_response_bytes == JUDGE_MAX_RESPONSE_BYTES


def test_a_judge_redirect_is_not_followed_and_says_so(tmp_path: Path) -> None:
    result, server, _ = judge_once(redirect(), tmp_path, max_retries=2, backoff_s=0.01)
    assert server.count == 1
    assert result.status == "judge_error"
    assert "the server answered 302 (redirect to http://elsewhere.invalid/x, not followed)" in result.reason


def test_a_judges_compressed_reply_under_the_cap_is_read_as_before(tmp_path: Path) -> None:
    result, _, _ = judge_once(Answer(gzip.compress(ENVELOPE), headers=(("Content-Encoding", "gzip"),)), tmp_path)
    assert result.status == "ok" and result.output == GROUNDED


# ---- what a hostile server said, printed ------------------------------------------------------------------


def test_a_reason_holding_rich_markup_is_printed_as_written() -> None:
    """An error text is the server's: `[/]` in it made the run's summary raise MarkupError (after the run
    had landed), and the `[redacted]` marker vanished from the printed line (rich took it for a style)."""
    from raglake.cli import render

    reason = "judge error: HTTP 401: [/] Bearer [redacted]"
    row = {"metric": "groundedness", "family": "judge", "n": 0, "n_rows": 3, "n_failed": 3, "main_reason": reason}
    with render.console.capture() as printed:
        for line in render.unscored_lines([row]):
            render.console.print(line, highlight=False)
        render.console.print(render.summary_table([{**row, "n": 2, "mean": 3.0}], "run r"))
    assert "failed on every case (judge error: HTTP 401: [/] Bearer [redacted])" in printed.get()
    assert "3 failed (mostly judge error: HTTP 401: [/] Bearer [redacted])" in printed.get()
