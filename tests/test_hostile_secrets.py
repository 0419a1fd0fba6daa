"""Secrets are never stored (issue 25, README "Secrets"): a judge endpoint whose 401 body echoes the
Authorization header put the API key in `scores`, `judge_calls`, `_results` and on stdout; an http target
echoing `Bearer ${TOKEN}` put it in `cases.capture_error`, `_cache/captures/…` and `_results`. The edges
(the gateway, the http client) now redact every known secret from whatever they keep, before the first
write. The end-to-end test runs `raglake run` (judge + http target), `report` and `metaeval` through the
command line and looks for the planted secrets in every byte under its folder and in what they printed."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import secrets
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from raglake.judge.config import JudgeConfig
from raglake.judge.gateway import JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.judge.prompts import get_prompt
from raglake.lake.calls import LakeCallStore
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.redact import REDACTED, Redactor
from raglake.targets.http_client import capture_all
from raglake.targets.http_config import load_http_config
from tests.fake_openai import completion, ok
from tests.faultkit import Answer, FaultServer, Request, golden_cases, json_answer, service_body, service_config

TOKEN_VAR, KEY_VAR = "RAGLAKE_HOSTILE_TOKEN", "RAGLAKE_HOSTILE_KEY"


def planted(kind: str) -> str:
    return f"{kind}-planted-{secrets.token_hex(12)}"


# ---- the http target -----------------------------------------------------------------------------------


def echo(request: Request) -> str:
    """What a careless service says back: every header it got."""
    return json.dumps(request.headers)


def capture(respond: Any, tmp_path: Path, headers: dict[str, str], **config: Any) -> tuple[Any, FaultServer]:
    with FaultServer(respond) as server:
        cfg = load_http_config(service_config(tmp_path, server.port, headers=headers, **{"retries": 0, **config}))
        [one] = asyncio.run(capture_all(cfg, golden_cases(["c1"]), 5))
        return one, server


@pytest.mark.parametrize(
    "status, shape",
    [
        (401, lambda t: f"unauthorised: {t}"),
        (403, lambda t: f"bad token {urllib.parse.quote(t)}"),
        (500, lambda t: f"crash dump: {base64.b64encode(t.encode()).decode()}"),
        (400, lambda t: json.dumps({"detail": f'token "{t}" refused'})),
    ],
)
def test_an_http_targets_error_body_echoing_the_token_is_redacted(tmp_path: Path, monkeypatch, status, shape) -> None:  # noqa: ANN001
    token = planted("tok")
    monkeypatch.setenv(TOKEN_VAR, token)

    def respond(request: Request) -> Answer:
        return Answer(shape(request.headers["authorization"].split()[1]).encode(), status=status)

    one, server = capture(respond, tmp_path, {"Authorization": f"Bearer ${{{TOKEN_VAR}}}"})
    assert server.requests[0].headers["authorization"] == f"Bearer {token}"  # the service did get it
    assert one.status == "error" and f"HTTP {status}" in one.error and REDACTED in one.error
    assert token not in one.error and urllib.parse.quote(token) not in one.error
    assert base64.b64encode(token.encode()).decode() not in one.error


def test_every_secret_header_and_variable_is_redacted_from_error_redirect_and_answer(
    tmp_path: Path, monkeypatch
) -> None:  # noqa: ANN001
    token, password, cookie, tenant = planted("tok"), planted("pw"), planted("ck"), planted("tenant")
    basic = base64.b64encode(f"robot:{password}".encode()).decode()
    monkeypatch.setenv(TOKEN_VAR, token)
    monkeypatch.setenv("RAGLAKE_HOSTILE_BASIC", basic)
    monkeypatch.setenv("RAGLAKE_HOSTILE_TENANT", tenant)
    headers = {
        "X-Api-Key": f"${{{TOKEN_VAR}}}",
        "Proxy-Authorization": "Basic ${RAGLAKE_HOSTILE_BASIC}",
        "Cookie": f"session={cookie}; theme=dark",
        "X-Tenant": "${RAGLAKE_HOSTILE_TENANT}",  # not a credential header: a ${VAR} all the same
    }
    everything = [token, password, f"robot:{password}", basic, cookie, tenant]
    said = f"you sent {' and '.join(everything)}"
    answers = {
        "401": Answer(said.encode(), status=401),
        "302": Answer(b"", status=302, headers=(("Location", f"http://login.invalid/?next={token}&c={cookie}"),)),
        "200": json_answer({**service_body("c1"), "answer": said}),
        "gzip": Answer(
            gzip.compress(json.dumps({**service_body("c1"), "answer": said}).encode()),
            headers=(("Content-Encoding", "gzip"),),
        ),
    }
    for name, answer in answers.items():
        one, _ = capture(lambda request, a=answer: a, tmp_path, headers)
        kept = json.dumps(one.model_dump(mode="json"))
        assert REDACTED in kept, name
        leaked = [s for s in everything if s in kept]
        assert not leaked, f"{name}: {leaked} in {kept}"


# ---- the judge -------------------------------------------------------------------------------------------


def judge_calls(lake: Lake) -> list[dict[str, Any]]:
    return connect(lake).sql("SELECT * FROM judge_calls").to_arrow_table().to_pylist()


def test_a_judge_echoing_its_key_in_a_401_or_a_reply_never_gets_it_kept(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    key = planted("sk")
    monkeypatch.setenv(KEY_VAR, key)

    def respond(request: Request) -> Answer:
        auth = request.headers["authorization"]
        if "c refuse" in request.json()["messages"][-1]["content"]:
            return json_answer({"error": {"message": f"Incorrect API key provided: {auth}"}}, status=401)
        grounded = {"score": 4, "supported_claims": [], "unsupported_claims": [], "reasoning": f"{auth} is fine"}
        return json_answer(completion(ok(grounded), request.json(), model=f"echo {key}"))

    lake = Lake(tmp_path / "lake")
    with FaultServer(respond) as server:
        config = JudgeConfig(base_url=server.url("/v1"), model="gpt-4o-mini", api_key_env=KEY_VAR, max_retries=0)
        gateway = JudgeGateway(config, JudgeLedger(LakeCallStore(lake), run_id="r-secrets"))

        async def main() -> list:
            prompt = get_prompt("groundedness")
            return [
                await gateway.call(prompt, {"answer": f"a {i}", "contexts": f"[1] c {end}"})
                for i, end in enumerate(("refuse", "ok"))
            ]

        refused, answered = asyncio.run(main())
        gateway.ledger.flush()
    assert all(r.headers["authorization"] == f"Bearer {key}" for r in server.requests)
    assert refused.status == "judge_error" and "HTTP 401" in refused.reason and REDACTED in refused.reason
    assert key not in refused.reason
    assert answered.status == "ok" and key not in json.dumps(answered.output)
    assert answered.output["reasoning"] == f"Bearer {REDACTED} is fine"
    rows = judge_calls(lake)
    assert len(rows) == 2 and not [r for r in rows if key in json.dumps(r, default=str)]


def test_the_redactor() -> None:
    secret = "s3cret-" + "x" * 20
    redact = Redactor.for_request({"Authorization": f"Bearer {secret}", "Accept": "application/json"})
    assert redact(f"got {secret}!") == f"got {REDACTED}!"
    assert redact("application/json") == "application/json"  # only credential headers are secrets
    assert redact.error("auth: Bearer abc123def456 and Basic dXNlcjpwYXNzMTIz") == (
        f"auth: Bearer {REDACTED} and Basic {REDACTED}"
    )
    assert redact.error("Bearer authentication is required") == "Bearer authentication is required"
    assert Redactor(["short"])("a short word") == "a short word"  # under MIN_SECRET_CHARS: not hidden
    cut = redact.error("x" * 290 + secret, 300)  # a secret across the cut is not left half there
    assert secret[:10] not in cut and len(cut) == 300
    assert redact.body(f'{{"a": "{secret}"}}'.encode()) == f'{{"a": "{REDACTED}"}}'.encode()
