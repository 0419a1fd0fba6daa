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
import os
import secrets
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
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
from tests.conftest import ROOT
from tests.fake_openai import canned_reply, completion, ok
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


# ---- end to end: run, report, metaeval through the command line, then every byte they left -------------

GOLDEN = [
    {
        "id": cid,
        "question": f"What does note {cid} say?",
        "reference_answer": f"answer to {cid}",
        "gold_supports": [{"rel_path": "notes/a.md", "heading_path": "A"}],
    }
    for cid in ("c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9")
]


def hostile_service(token_seen: list[str]) -> Any:
    """c1: a 401 echoing the headers; c2: 500s echoing them (retried); c3: a redirect carrying the token;
    c4: an answer repeating the Authorization header; the rest answer properly."""

    def respond(request: Request) -> Answer:
        auth = request.headers.get("authorization", "")
        token_seen.append(auth)
        case_id = request.json()["case_id"]
        if case_id == "c1":
            return json_answer({"detail": f"invalid credentials {echo(request)}"}, status=401)
        if case_id == "c2":
            return Answer(f"upstream failed for {auth}".encode(), status=500, content_type="text/plain")
        if case_id == "c3":
            return Answer(b"", status=302, headers=(("Location", f"http://sso.invalid/?{auth.split()[-1]}"),))
        if case_id == "c4":
            return json_answer({**service_body(case_id), "answer": f"answer to {case_id} (you are {auth})"})
        return json_answer(service_body(case_id))

    return respond


def hostile_judge(key_seen: list[str]) -> Any:
    """An OpenAI-compatible judge that answers some prompts with a 401 echoing the key and the others
    with a valid verdict whose reasoning repeats the Authorization header."""
    from tests.fake_openai import prompt_id_of

    def respond(request: Request) -> Answer:
        auth = request.headers.get("authorization", "")
        key_seen.append(auth)
        body = request.json()
        user = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
        if prompt_id_of(body) == "groundedness" or any(w in user for w in ("c2", "c5", "Marlowe", "Lyon")):
            return json_answer({"error": {"message": f"Incorrect API key provided: {auth}"}}, status=401)
        reply = canned_reply(body)
        verdict = json.loads(reply.content)
        if isinstance(verdict, dict):
            verdict["reasoning"] = f"checked with {auth}"
        return json_answer(completion(ok(verdict), body))

    return respond


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)] + [s for k in value for s in strings(k)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


def leaks(root: Path, needles: list[str]) -> list[str]:
    """Every file under `root` holding a needle: in its raw bytes, gzip'd, or in any string cell of a
    Parquet file (zstd-compressed pages hide raw bytes)."""
    found = []
    raw_needles = [n.encode() for n in needles]
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        texts = [data]
        if data[:2] == b"\x1f\x8b":
            texts.append(gzip.decompress(data))
        if any(n in t for t in texts for n in raw_needles):
            found.append(f"{path} (bytes)")
        if data[:4] == b"PAR1":
            cells = strings(pq.read_table(path).to_pylist())
            if any(n in cell for cell in cells for n in needles):
                found.append(f"{path} (parquet)")
    return found


def parquet_count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file() and p.read_bytes()[:4] == b"PAR1")


@pytest.mark.e2e
def test_the_planted_secrets_are_nowhere_after_run_report_and_metaeval(prefect_harness, tmp_path: Path) -> None:  # noqa: ANN001
    from prefect.settings import PREFECT_API_URL

    key, token = planted("sk"), planted("tok")
    work = tmp_path / "work"
    work.mkdir()
    golden = work / "golden.jsonl"
    golden.write_text("".join(json.dumps(c) + "\n" for c in GOLDEN))
    lake, cache = tmp_path / "lake", tmp_path / "cache"
    env = {
        **os.environ,
        KEY_VAR: key,
        TOKEN_VAR: token,
        "COLUMNS": "200",
        "PREFECT_API_URL": PREFECT_API_URL.value(),
        "RAGLAKE_CACHE": str(cache),
    }
    env.pop("RAGLAKE_RESULTS", None)  # the results store: <lake>/_results
    key_seen: list[str] = []
    token_seen: list[str] = []
    outputs: list[str] = []

    def raglake(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "raglake", *args], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        outputs.extend([done.stdout, done.stderr])
        return done

    with FaultServer(hostile_service(token_seen)) as service, FaultServer(hostile_judge(key_seen)) as judge:
        config = service_config(
            work, service.port, headers={"Authorization": f"Bearer ${{{TOKEN_VAR}}}"}, retries=1, backoff_s=0.01
        )
        judge_args = ["--judge-base-url", judge.url("/v1"), "--judge-model", "gpt-4o-mini"]
        judge_args += ["--judge-api-key-env", KEY_VAR]
        run = raglake(
            "run", "--golden", str(golden), "--target", f"http:{config}", "--lake", str(lake),
            "--run-id", "r-secrets", "-m", "recall_any_at_k,groundedness,correctness", *judge_args,
        )  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert REDACTED in run.stdout  # the judge's failure line was printed, the key in it redacted
        report = raglake("report", "r-secrets", "--lake", str(lake), "-o", str(tmp_path / "report.html"))
        assert report.returncode == 0, report.stdout + report.stderr
        judged_by_the_run = len(key_seen)
        metaeval = raglake(
            "metaeval", "--data", str(ROOT / "tests" / "fixtures" / "metaeval_tiny.jsonl"), "--datasets", "tiny_qa",
            "--metrics", "answer_class_correct", "--max-items", "0", "--resamples", "100", "--lake", str(lake),
            *judge_args,
        )  # fmt: skip
        assert metaeval.returncode == 0, metaeval.stdout + metaeval.stderr

    # the servers really got the secrets, and really said them back
    assert f"Bearer {token}" in token_seen and f"Bearer {key}" in key_seen
    q = connect(Lake(str(lake)))
    errors = dict(q.sql("SELECT case_id, capture_error FROM cases WHERE run_id = 'r-secrets'").fetchall())
    assert {"c1", "c2", "c3"} <= {c for c, e in errors.items() if e and REDACTED in e}, errors
    assert "not followed" in errors["c3"]
    reasons = [r[0] for r in q.sql("SELECT error FROM judge_calls WHERE status = 'judge_error'").fetchall()]
    assert reasons and all(REDACTED in r for r in reasons), reasons
    assert len(key_seen) > judged_by_the_run  # metaeval asked the judge too (and was refused some)
    assert q.sql("SELECT count(*) FROM metaeval").fetchall()[0][0] > 0
    assert (tmp_path / "report.html").stat().st_size > 0 and parquet_count(lake) > 0
    assert any((lake / "_results").rglob("*")) and any((cache / "captures").rglob("*"))

    # ... and kept them nowhere: the lake, _results, _cache, the report, the inputs, what was printed
    (tmp_path / "printed.txt").write_text("\n".join(outputs))
    found = leaks(tmp_path, [key, token])
    assert not found, "the planted key or token is in:\n" + "\n".join(found)


def test_a_secret_across_the_error_cut_is_never_left_half_there() -> None:
    """Redacting a text cut first pulled a half secret from beyond the cut into the kept 300 characters."""
    key = "sk-" + "A1b2C3d4E5" * 4
    redactor = Redactor([key])
    for pad in range(0, 160, 7):  # the key straddles the cut at some pad, whatever the marker's length
        text = redactor.error((key + " ") * 12 + "x" * pad + key, 300)
        assert "A1b2C3d4E5A1b2" not in text and len(text) <= 300, pad


def test_a_credential_in_a_header_of_any_name_is_redacted() -> None:
    """Ocp-Apim-Subscription-Key and X-Goog-Api-Key carry keys though they are not Authorization or X-Api-Key."""
    headers = {"Ocp-Apim-Subscription-Key": "abcdef0123456789", "X-Goog-Api-Key": "g00gle-key-123456"}
    redactor = Redactor.for_request({**headers, "Content-Type": "application/json"}, [])
    echoed = "401: bad key abcdef0123456789 (X-Goog-Api-Key: g00gle-key-123456) for application/json"
    assert redactor.error(echoed) == f"401: bad key {REDACTED} (X-Goog-Api-Key: {REDACTED}) for application/json"
