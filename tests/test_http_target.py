"""The `http` target (issue 6): its config file, body template, JSON-path mapping and retry rules as
units; then against the demo service (`raglake serve-demo`'s app, started in-process on a free
loopback port) with sticky fault injection: every case captured once with the injected status,
retries where they belong, the run-level rates equal to the injected counts; then through the
`evaluate` flow: one cases row per golden case, `capture_failed` scores, run_metrics, no secret in
any file of the lake, the service's manifest in `coverage`, capture health by slice, and
`raglake compare` noticing that the index changed."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import os
import secrets
import shutil
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from raglake.errors import ConfigError, InputError
from raglake.golden import load_golden
from raglake.schemas import GoldenCase
from raglake.targets.http_client import (
    MappingError,
    capture_all,
    fetch_capture,
    map_response,
    retry_after_seconds,
)
from raglake.targets.http_config import HttpTargetConfig, load_http_config, render_body, template_fields
from raglake.targets.jsonpath import MISSING, get_path, parse_path
from tests.conftest import ROOT

SAMPLE_GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
DEMO_CONFIG = ROOT / "data" / "targets" / "demo.yaml"
# a few notes of data/corpus (the big incident log left out so the index builds in seconds), plus the
# files the indexer must skip or find empty, so the manifest has something in every column
CORPUS_SUBSET = (
    "work/projects/atlas.md", "work/projects/atlas-architecture.md", "work/projects/beacon.md",
    "work/decisions/adr-012-event-bus.md", "work/decisions/adr-015-cache-ttl.md",
    "work/meetings/2024-03-04-atlas-steering.md", "personal/recipes/sourdough.md",
    "personal/travel/japan-2024.md", "personal/inbox/empty.md", "work/drafts/frontmatter-only.md",
    "work/reference/oncall-phone-tree.txt",
)
STATUS_OF_FAULT = {None: "ok", "error": "error", "malformed": "error", "timeout": "timeout", "empty": "empty"}
# sticky faults on the 66-question sample (seed 6: 7 errors, 4 timeouts, 8 empty, 4 malformed, 13 flaky)
FAULTS = dict(error_rate=0.1, timeout_rate=0.05, empty_rate=0.1, malformed_rate=0.05, flaky_rate=0.2, seed=6)
TIMEOUT_S = 2.0  # the client's; a sticky "timeout" question hangs HANG_S on the server
HANG_S = 4.0
FLOW_METRICS = ["recall_any_at_k", "mrr_at_k", "abstention_accuracy"]


# ---- the demo service, in-process ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_corpus(dest: Path) -> Path:
    for rel in CORPUS_SUBSET:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "data" / "corpus" / rel, dest / rel)
    return dest


@dataclass
class Demo:
    """The demo app served by uvicorn in a background thread; `log` holds (method, path,
    Authorization header) for every request the app received."""

    target: Any
    faults: Any
    app: Any
    port: int
    server: Any
    thread: threading.Thread
    log: list[tuple[str, str, str | None]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> Counter:
        return self.app.state.requests

    def reset(self) -> None:
        """Forget every request (the sticky faults stay; flaky questions fail their next first attempt)."""
        self.app.state.requests.clear()
        self.log.clear()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def start_demo(corpus: Path, lake_url: str, faults: Any, warm: list[str] = ()) -> Demo:
    """Index `corpus`, encode the `warm` questions once (so requests hit the demo's vector cache and
    stay fast on a loaded machine), then serve the app on a free loopback port."""
    import uvicorn

    from raglake.demo.app import create_app
    from raglake.targets.builtin import BuiltinTarget

    target = BuiltinTarget(str(corpus), lake_url, None)
    target.manifest()
    if warm:
        target.capture([GoldenCase(id=f"warm-{i}", question=q) for i, q in enumerate(dict.fromkeys(warm))])
    app = create_app(target, faults)
    log: list[tuple[str, str, str | None]] = []

    @app.middleware("http")
    async def record(request, call_next):  # noqa: ANN001, ANN202
        log.append((request.method, request.url.path, request.headers.get("authorization")))
        return await call_next(request)

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, name=f"demo-{port}", daemon=True)
    thread.start()
    demo = Demo(target, faults, app, port, server, thread, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(demo.url("/healthz"), timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the demo did not come up on port {port}")
        time.sleep(0.05)
    log.clear()
    return demo


def write_config(path: Path, port: int, **overrides: Any) -> Path:
    """data/targets/demo.yaml pointed at `port`, with some fields changed."""
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    config["url"] = f"http://127.0.0.1:{port}/debug/query"
    config["manifest_url"] = f"http://127.0.0.1:{port}/debug/index"
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def expected_status(faults: Any, question: str) -> str:
    return STATUS_OF_FAULT[faults.fault_for(question)]


def is_flaky(faults: Any, question: str) -> bool:
    return faults.draw(question, "flaky") < faults.flaky_rate


def expected_attempts(faults: Any, question: str, retries: int) -> int:
    """Sticky 500s and hangs use every retry; a flaky question's first 503 costs one more attempt;
    nothing else is retried (a malformed body is not a transient failure)."""
    if faults.fault_for(question) in ("error", "timeout"):
        return retries + 1
    return 2 if is_flaky(faults, question) else 1


# ---- config file ---------------------------------------------------------------------------------

BAD_CONFIGS = [
    ("placeholder", 'url: http://h/q\nname: x\nbody:\n  q: "{questin}"\n', 3, "body",
     "unknown placeholder {questin} (did you mean 'question'?)"),
    ("nested_placeholder", 'url: http://h/q\nbody:\n  meta: ["{case_id}", "{catgory}"]\n', 2, "body",
     "unknown placeholder {catgory} (did you mean 'category'?)"),
    ("latency_stage", "url: http://h/q\nresponse:\n  answer: a\n  latency_ms:\n    retreival: t.r\n", 2,
     "response.latency_ms", "unknown latency stage 'retreival' (did you mean 'retrieval'?)"),
    ("method", "url: http://h/q\n\nmethod: DELETE\n", 3, "method", "method must be GET, POST or PUT, got 'DELETE'"),
    ("unknown_field", "url: http://h/q\nconcurency: 4\n", 2, "concurency",
     "unknown field (did you mean 'concurrency'?)"),
    ("nested_unknown_field", "url: http://h/q\nresponse:\n  anwser: a\n", 2, "response.anwser",
     "unknown field (did you mean 'answer'?)"),
    ("url_scheme", "name: x\nurl: ftp://h/q\n", 2, "url", "should match pattern"),
    ("missing_url", "name: x\nretries: 2\n", 1, "url", "required field is missing"),
    ("timeout", "url: http://h/q\ntimeout_s: 0\n", 2, "timeout_s", "greater than 0"),
    ("concurrency", "url: http://h/q\nconcurrency: 0\n", 2, "concurrency", "greater than or equal to 1"),
]


@pytest.mark.parametrize(("name", "text", "line", "field", "words"), BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS])
def test_bad_config_names_file_line_and_field(tmp_path: Path, name: str, text: str, line: int, field: str,
                                              words: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        load_http_config(path)
    e = info.value
    assert (e.path, e.line, e.field) == (str(path), line, field)
    assert str(e).startswith(f"{path}:{line}: field {field!r}:") and words in str(e)


def test_unreadable_configs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="http target config not found"):
        load_http_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("url: http://h/q\nbody: {question: [\n")
    with pytest.raises(InputError, match=r"broken\.yaml:\d+: invalid YAML"):
        load_http_config(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- url: http://h/q\n")
    with pytest.raises(InputError, match="expected a mapping with at least `url`"):
        load_http_config(listing)


def test_the_shipped_demo_config_loads() -> None:
    config = load_http_config(DEMO_CONFIG)
    assert config.method == "POST" and config.name == "demo"
    assert template_fields(config.body) == {"question", "case_id", "vault"}
    assert set(config.response.latency_ms) == {"folder_selection", "retrieval", "generation", "total"}


def test_secret_free_records_env_var_names_never_values(monkeypatch) -> None:
    monkeypatch.setenv("RAGLAKE_UNIT_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("RAGLAKE_UNIT_TENANT", "tenant-7")
    config = HttpTargetConfig(url="http://h/q", headers={"Authorization": "Bearer ${RAGLAKE_UNIT_TOKEN}",
                                                         "X-Pair": "${RAGLAKE_UNIT_TENANT}:${RAGLAKE_UNIT_TOKEN}",
                                                         "X-Literal": "plain-api-key"})
    assert config.resolved_headers() == {"Authorization": "Bearer s3cr3t-value", "X-Pair": "tenant-7:s3cr3t-value",
                                         "X-Literal": "plain-api-key"}
    recorded = config.secret_free()
    assert recorded["headers"] == {"Authorization": "<from ${RAGLAKE_UNIT_TOKEN}>",
                                   "X-Pair": "<from ${RAGLAKE_UNIT_TENANT, RAGLAKE_UNIT_TOKEN}>",
                                   "X-Literal": "<redacted>"}
    text = json.dumps(recorded)
    assert "s3cr3t-value" not in text and "plain-api-key" not in text and "tenant-7" not in text
    before = config.fingerprint()
    monkeypatch.setenv("RAGLAKE_UNIT_TOKEN", "rotated")
    assert config.fingerprint() == before  # rotating a token does not make a different target


def test_missing_env_var_fails_the_check_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    from raglake.runplan import plan_run

    monkeypatch.delenv("RAGLAKE_UNSET_TOKEN", raising=False)
    config = write_config(tmp_path / "svc.yaml", free_port(),
                          headers={"Authorization": "Bearer ${RAGLAKE_UNSET_TOKEN}"})
    lake = tmp_path / "lake"
    with pytest.raises(ConfigError, match=r"needs environment variable \$\{RAGLAKE_UNSET_TOKEN\}, which is not set"):
        plan_run(target=f"http:{config}", golden=str(SAMPLE_GOLDEN), lake=str(lake))
    assert not lake.exists()


# ---- body template, JSON paths ---------------------------------------------------------------------


def test_render_body() -> None:
    values = {"question": "Who owns Atlas?", "case_id": "c-1", "category": None, "difficulty": "easy",
              "vault": "work", "tags": ["atlas", "db"], "k": 5}
    template = {"q": "{question}", "tags": "{tags}", "k": "{k}", "prompt": "[{case_id}] {question} (k={k})",
                "cat": "{category}", "label": "cat={category};", "nested": [{"v": "{vault}"}, 3, True, None],
                "literal": "no placeholders", "braces": "{not a field}"}
    assert render_body(template, values) == {
        "q": "Who owns Atlas?", "tags": ["atlas", "db"], "k": 5, "prompt": "[c-1] Who owns Atlas? (k=5)",
        "cat": None, "label": "cat=;", "nested": [{"v": "work"}, 3, True, None],
        "literal": "no placeholders", "braces": "{not a field}",
    }
    assert render_body("{question}", values) == "Who owns Atlas?"
    with pytest.raises(KeyError):
        render_body({"x": "{nope}"}, values)
    assert template_fields(template) == {"question", "tags", "k", "case_id", "category", "vault"}


def test_json_path_getter() -> None:
    data = {"a": {"b": [{"c": 1}, {"c": None}], "0": "key zero"}, "list": [[10, 20]], "t": {"x.y": 1}}
    assert parse_path("$.a.b[1].c") == parse_path("a.b[1].c") == parse_path("$a.b[1].c") == ("a", "b", 1, "c")
    assert get_path(data, "a.b[0].c") == 1
    assert get_path(data, "$.a.b[0].c") == 1
    assert get_path(data, "a.b[1].c") is None  # present, null
    assert get_path(data, "list[0][1]") == 20
    assert get_path(data, "a.0") == "key zero"  # a dotted number is a key, not an index
    for absent in ("a.b[2].c", "a.x", "a.b.c", "list[0][5]", "a[0]", "a.b[0].c.d", "nope"):
        assert get_path(data, absent) is MISSING, absent
    assert get_path(data, "$") is data
    assert get_path([{"answer": "x"}], "[0].answer") == "x"


def _debug_body(**changes: Any) -> dict[str, Any]:
    body = {
        "answer": "Atlas runs on db.r6g.xlarge.", "abstained": False,
        "references": [{"rel_path": "work/projects/atlas.md", "heading_path": "Project Atlas > Decisions"}],
        "chunks": [{"rank": 2, "rel_path": "b.md", "heading_path": "B", "text": "bee", "score": 0.5},
                   {"rank": 1, "rel_path": "work/projects/atlas.md", "heading_path": ["Project Atlas", "Decisions"],
                    "text": "db.r6g.xlarge", "score": 0.9}],
        "debug": {"folder_mode": "on_with_fallback", "selected_folders": ["work/projects"], "method": "x"},
        "timings": {"folder_selection_ms": 1.5, "retrieval_ms": 12, "generation_ms": 3.25, "total_ms": 16.75},
    }
    body.update(changes)
    return body


def test_map_response_through_the_demo_config() -> None:
    config = load_http_config(DEMO_CONFIG)
    fields = map_response(_debug_body(), config, "c-1")
    assert fields["case_id"] == "c-1" and fields["method"] == "demo"
    assert fields["answer"] == "Atlas runs on db.r6g.xlarge." and fields["abstained"] is False
    assert fields["references"] == [{"rel_path": "work/projects/atlas.md", "heading_path": "Project Atlas > Decisions"}]
    assert [c["rank"] for c in fields["retrieved"]] == [2, 1] and fields["retrieved"][1]["score"] == 0.9
    assert fields["folder_mode"] == "on_with_fallback" and fields["selected_folders"] == ["work/projects"]
    assert fields["latency_ms"] == {"folder_selection": 1.5, "retrieval": 12, "generation": 3.25, "total": 16.75}
    # missing or null optional fields map to their empty values
    sparse = map_response({"answer": None}, config, "c-2")
    assert sparse["answer"] == "" and sparse["retrieved"] == [] and sparse["references"] == []
    assert sparse["latency_ms"] == dict.fromkeys(("folder_selection", "retrieval", "generation", "total"))
    # rank from the list order when the mapping says so
    by_order = config.model_copy(update={"response": config.response.model_copy(
        update={"chunk": config.response.chunk.model_copy(update={"rank": None})})})
    assert [c["rank"] for c in map_response(_debug_body(), by_order, "c-3")["retrieved"]] == [1, 2]


@pytest.mark.parametrize(("changes", "message"), [
    ({"answer": 42}, "answer at 'answer' is a int, expected str"),
    ({"abstained": "no"}, "abstained at 'abstained' is a str, expected bool"),
    ({"chunks": {"rank": 1}}, "retrieved chunks at 'chunks' is a dict, expected list"),
    ({"chunks": [{"rank": True, "rel_path": "a.md"}]}, "chunk rank at 'rank' is a bool, expected int"),
    ({"chunks": [{"rank": 1, "rel_path": "a.md", "score": "high"}]},
     "chunk score at 'score' is a str, expected int or float"),
    ({"timings": {"total_ms": "16"}}, "latency total at 'timings.total_ms' is a str, expected int or float"),
])
def test_map_response_type_errors(changes: dict, message: str) -> None:
    config = load_http_config(DEMO_CONFIG)
    with pytest.raises(MappingError) as info:
        map_response(_debug_body(**changes), config, "c-1")
    assert str(info.value) == message


# ---- the request loop, against a mock transport ------------------------------------------------------


def _fetch(handler, case: GoldenCase | None = None, **config: Any):  # noqa: ANN001, ANN202
    """One fetch_capture through httpx.MockTransport; returns (capture, requests seen, sleeps asked for)."""
    base = load_http_config(DEMO_CONFIG).model_dump()
    base.update({"retries": 2, "backoff_s": 0.1, "max_backoff_s": 10.0, "manifest_url": None, **config})
    cfg = HttpTargetConfig.model_validate(base)
    seen: list[httpx.Request] = []
    sleeps: list[float] = []

    def transport(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request, len(seen))

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def go():  # noqa: ANN202
        async with httpx.AsyncClient(transport=httpx.MockTransport(transport)) as client:
            return await fetch_capture(client, cfg, {"X-Client": "test"}, case or GoldenCase(id="c-1", question="q?"),
                                       5, sleep=sleep)

    return asyncio.run(go()), seen, sleeps


def test_request_body_and_a_good_response() -> None:
    case = GoldenCase(id="c-9", question="Who owns Atlas?", vault="work")
    capture, seen, sleeps = _fetch(lambda r, n: httpx.Response(200, json=_debug_body()), case)
    assert json.loads(seen[0].content) == {"question": "Who owns Atlas?", "case_id": "c-9", "vault": "work"}
    assert seen[0].headers["x-client"] == "test" and seen[0].method == "POST"
    assert capture.status == "ok" and capture.attempts == 1 and not sleeps and capture.error is None
    assert [c.rank for c in capture.retrieved] == [1, 2]  # sorted by rank
    assert capture.latency_ms.total == 16.75 and capture.latency_ms.wall is not None and capture.latency_ms.wall >= 0


def test_get_sends_the_body_as_query_parameters() -> None:
    _, seen, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body()), method="GET",
                        body={"q": "{question}", "k": "{k}"})
    assert seen[0].method == "GET" and dict(seen[0].url.params) == {"q": "q?", "k": "5"}


def test_5xx_is_retried_with_exponential_backoff_then_recorded() -> None:
    capture, seen, sleeps = _fetch(lambda r, n: httpx.Response(502, text="bad gateway"), retries=3, backoff_s=0.1)
    assert capture.status == "error" and capture.attempts == 4 == len(seen)
    assert capture.error == "HTTP 502: bad gateway (after 4 attempt(s))"
    assert len(sleeps) == 3
    for i, s in enumerate(sleeps):  # base * 2^i with ±50 % jitter
        assert 0.05 * 2**i <= s <= 0.15 * 2**i
    assert capture.latency_ms.wall is not None and capture.answer == "" and capture.retrieved == []


def test_backoff_is_capped() -> None:
    _, _, sleeps = _fetch(lambda r, n: httpx.Response(500), retries=4, backoff_s=1.0, max_backoff_s=1.5)
    assert all(s <= 1.5 * 1.5 for s in sleeps) and sleeps[-1] >= 0.75


def test_429_honours_retry_after() -> None:
    def handler(request: httpx.Request, n: int) -> httpx.Response:
        if n == 1:
            return httpx.Response(429, headers={"Retry-After": "3"}, text="slow down")
        return httpx.Response(200, json=_debug_body())

    capture, seen, sleeps = _fetch(handler, backoff_s=0.01)
    assert capture.status == "ok" and capture.attempts == 2 == len(seen)
    assert sleeps == [3.0]  # the server's wait, not the (shorter) backoff


@pytest.mark.parametrize("code", [400, 401, 403, 404, 405, 409, 422])
def test_4xx_other_than_429_is_not_retried(code: int) -> None:
    capture, seen, sleeps = _fetch(lambda r, n: httpx.Response(code, text="nope"))
    assert capture.status == "error" and capture.attempts == 1 == len(seen) and not sleeps
    assert capture.error == f"HTTP {code}: nope (after 1 attempt(s))"


def test_bad_bodies_become_error_captures_without_retry() -> None:
    capture, seen, _ = _fetch(lambda r, n: httpx.Response(200, text='{"answer": "cut',
                                                          headers={"content-type": "application/json"}))
    assert capture.status == "error" and capture.attempts == 1 == len(seen)
    assert capture.error.startswith("malformed JSON response: Unterminated string starting at")
    assert "line 1 column 12" in capture.error

    capture, seen, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body(answer=["a", "b"])))
    assert capture.status == "error" and capture.attempts == 1 == len(seen)
    assert capture.error == ("response does not map onto a capture: answer at 'answer' is a list, expected str "
                             "(after 1 attempt(s))")

    capture, _, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body(
        chunks=[{"rank": 1, "rel_path": "a.md"}, {"rank": 1, "rel_path": "b.md"}])))
    assert capture.status == "error" and "response does not map onto a capture" in capture.error
    assert "duplicate rank" in capture.error


def test_empty_answer_is_empty_and_abstention_is_ok() -> None:
    capture, _, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body(answer="  ")))
    assert capture.status == "empty" and capture.attempts == 1
    capture, _, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body(answer="", abstained=True)))
    assert capture.status == "ok" and capture.abstained is True


def test_retry_after_seconds() -> None:
    def response(value: str | None) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value} if value is not None else {})

    assert retry_after_seconds(response("7")) == 7.0
    assert retry_after_seconds(response("1.5")) == 1.5
    assert retry_after_seconds(response("-3")) == 0.0
    assert retry_after_seconds(response(None)) is None
    assert retry_after_seconds(response("soon")) is None
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=30)
    assert 27 <= retry_after_seconds(response(format_datetime(later, usegmt=True))) <= 30.5
    earlier = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=30)
    assert retry_after_seconds(response(format_datetime(earlier, usegmt=True))) == 0.0


def test_capture_all_keeps_case_order_and_the_concurrency_limit(monkeypatch) -> None:
    """Results come back in case order whatever order the responses arrive in, and no more than
    `concurrency` requests are in flight (counted by a transport with varying delays)."""
    cases = [GoldenCase(id=f"c-{i}", question=f"question {i}?") for i in range(24)]
    in_flight, peak = 0, 0

    class Slow(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            body = json.loads(request.content)
            await asyncio.sleep(0.01 + 0.01 * (int(body["case_id"][2:]) % 3))  # out-of-order completions
            in_flight -= 1
            return httpx.Response(200, json=_debug_body(answer=f"answer to {body['case_id']}"))

    original = httpx.AsyncClient.__init__

    def with_transport(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        kwargs["transport"] = Slow()
        original(self, *args, **kwargs)

    config = HttpTargetConfig.model_validate({**load_http_config(DEMO_CONFIG).model_dump(), "concurrency": 3})
    seen: list[str] = []
    monkeypatch.setattr(httpx.AsyncClient, "__init__", with_transport)
    captures = asyncio.run(capture_all(config, cases, 5, lambda case, capture: seen.append(case.id)))
    assert [c.case_id for c in captures] == [c.id for c in cases]
    assert [c.answer for c in captures] == [f"answer to {c.id}" for c in cases]
    assert sorted(seen) == sorted(c.id for c in cases)
    assert peak == 3


# ---- against the demo service with sticky faults ---------------------------------------------------


@pytest.fixture(scope="module")
def golden():  # noqa: ANN201
    return load_golden(SAMPLE_GOLDEN)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return small_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def fault_demo(corpus: Path, golden, tmp_path_factory):  # noqa: ANN001, ANN201
    from raglake.demo.app import Faults

    faults = Faults(**FAULTS, hang_s=HANG_S)
    kinds = Counter(faults.fault_for(c.question) for c in golden.cases)
    assert all(kinds[k] for k in ("error", "timeout", "empty", "malformed")), kinds  # every fault is exercised
    assert any(is_flaky(faults, c.question) and faults.fault_for(c.question) is None for c in golden.cases)
    demo = start_demo(corpus, str(tmp_path_factory.mktemp("demo-lake")), faults, [c.question for c in golden.cases])
    yield demo
    demo.stop()


@dataclass
class Captured:
    captures: list
    requests: Counter
    retries: int
    seconds: float


@pytest.fixture(scope="module")
def captured(fault_demo: Demo, golden, tmp_path_factory) -> Captured:  # noqa: ANN001
    """The sample captured once through HttpTarget (the flow's path) with 2 retries."""
    from raglake.targets.http import HttpTarget

    config = write_config(tmp_path_factory.mktemp("cfg") / "faulty.yaml", fault_demo.port, retries=2,
                          backoff_s=0.01, max_backoff_s=0.05, timeout_s=TIMEOUT_S, concurrency=8)
    fault_demo.reset()
    t0 = time.perf_counter()
    captures = HttpTarget(str(config)).capture(golden.cases)
    return Captured(captures, Counter(fault_demo.requests), 2, time.perf_counter() - t0)


def test_every_case_is_captured_once_with_the_injected_status(captured: Captured, golden, fault_demo: Demo) -> None:
    assert [c.case_id for c in captured.captures] == [c.id for c in golden.cases]
    got = {c.case_id: c.status for c in captured.captures}
    want = {c.id: expected_status(fault_demo.faults, c.question) for c in golden.cases}
    assert got == want
    assert all(c.method == "demo" for c in captured.captures)  # the config's `name`
    assert all(c.status != "ok" or (c.answer and c.retrieved and c.latency_ms.total is not None)
               for c in captured.captures)
    # the demo got no question it was not asked, and every asked question at least once
    assert set(captured.requests) == {c.question for c in golden.cases}


def test_malformed_response_is_an_error_with_the_parse_message(captured: Captured, golden, fault_demo: Demo) -> None:
    malformed = [cap for case, cap in zip(golden.cases, captured.captures)
                 if fault_demo.faults.fault_for(case.question) == "malformed"]
    assert malformed
    for cap in malformed:
        assert cap.status == "error" and cap.answer == "" and cap.retrieved == []
        assert cap.error.startswith("malformed JSON response: Unterminated string starting at")
        assert "line 1 column 12" in cap.error and cap.error.endswith(f"(after {cap.attempts} attempt(s))")


def test_attempts_follow_the_retry_rules(captured: Captured, golden, fault_demo: Demo) -> None:
    faults, retries = fault_demo.faults, captured.retries
    for case, cap in zip(golden.cases, captured.captures):
        want = expected_attempts(faults, case.question, retries)
        got = (cap.attempts, captured.requests[case.question])
        assert got == (want, want), (case.id, faults.fault_for(case.question))


def test_flaky_questions_succeed_after_one_retry(captured: Captured, golden, fault_demo: Demo) -> None:
    flaky = [(case, cap) for case, cap in zip(golden.cases, captured.captures)
             if is_flaky(fault_demo.faults, case.question) and fault_demo.faults.fault_for(case.question) is None]
    assert flaky
    for case, cap in flaky:
        assert cap.status == "ok" and cap.attempts == 2 and captured.requests[case.question] == 2


def test_sticky_errors_and_hangs_use_every_retry(captured: Captured, golden, fault_demo: Demo) -> None:
    n = captured.retries + 1
    for case, cap in zip(golden.cases, captured.captures):
        fault = fault_demo.faults.fault_for(case.question)
        if fault == "error":
            assert cap.error == f'HTTP 500: {{"detail":"injected failure"}} (after {n} attempt(s))'
        elif fault == "timeout":
            assert cap.error == f"no response within {TIMEOUT_S:g} s (after {n} attempt(s))"
            hangs = n - is_flaky(fault_demo.faults, case.question)  # a flaky first attempt is a quick 503
            assert cap.latency_ms.wall >= hangs * TIMEOUT_S * 1000  # every hanging attempt waited the full timeout
        else:
            continue
        assert cap.attempts == n == captured.requests[case.question]


def test_run_level_rates_equal_the_injected_counts(captured: Captured, golden, fault_demo: Demo) -> None:
    from raglake.metrics.operational import RunInputs, empty_response_rate, error_rate, latency_p50_ms, timeout_rate

    faults, n = fault_demo.faults, len(golden.cases)
    kinds = Counter(faults.fault_for(c.question) for c in golden.cases)
    run = RunInputs(captured.captures)
    assert error_rate(run)[0].value == pytest.approx((kinds["error"] + kinds["malformed"]) / n)
    assert timeout_rate(run)[0].value == pytest.approx(kinds["timeout"] / n)
    assert empty_response_rate(run)[0].value == pytest.approx(kinds["empty"] / n)
    stages = {v.stage: v.n for v in latency_p50_ms(run)}
    ok_or_empty = n - kinds["error"] - kinds["malformed"] - kinds["timeout"]
    assert stages == {"folder_selection": ok_or_empty, "retrieval": ok_or_empty, "generation": ok_or_empty,
                      "total": ok_or_empty, "wall": n}


@pytest.mark.parametrize(("url_path", "overrides", "code"), [
    ("/debug/nope", {}, 404),
    ("/debug/query", {"method": "GET"}, 405),
    ("/debug/query", {"body": {"q": "{question}"}}, 422),
])
def test_a_client_error_is_not_retried(fault_demo: Demo, golden, tmp_path: Path, url_path: str, overrides: dict,
                                       code: int) -> None:
    from raglake.targets.http import HttpTarget

    config = write_config(tmp_path / "wrong.yaml", fault_demo.port, retries=3, backoff_s=0.01, timeout_s=TIMEOUT_S,
                          **overrides)
    data = yaml.safe_load(config.read_text())
    data["url"] = fault_demo.url(url_path)
    config.write_text(yaml.safe_dump(data))
    cases = golden.cases[:4]
    fault_demo.reset()
    captures = HttpTarget(str(config)).capture(cases)
    for cap in captures:
        assert cap.status == "error" and cap.attempts == 1
        assert cap.error.startswith(f"HTTP {code}: ") and cap.error.endswith("(after 1 attempt(s))")
    method = overrides.get("method", "POST")
    assert Counter(entry[:2] for entry in fault_demo.log) == {(method, url_path): len(cases)}  # one request each
    assert not fault_demo.requests  # the query handler never ran


def test_connection_errors_are_retried_then_recorded(golden, tmp_path: Path) -> None:
    from raglake.targets.http import HttpTarget

    config = write_config(tmp_path / "closed.yaml", free_port(), retries=2, backoff_s=0.01, max_backoff_s=0.02,
                          timeout_s=TIMEOUT_S, manifest_url=None)
    captures = HttpTarget(str(config)).capture(golden.cases[:3])
    for cap in captures:
        assert cap.status == "error" and cap.attempts == 3
        assert cap.error.startswith("connection error: ConnectError") and cap.error.endswith("(after 3 attempt(s))")


# ---- through the flow --------------------------------------------------------------------------------


@dataclass
class FlowRun:
    run_id: str
    lake: Path
    token: str
    retries: int


SECRET_VAR = "RAGLAKE_TEST_SECRET"


@pytest.fixture(scope="module")
def flow_run(prefect_harness, fault_demo: Demo, tmp_path_factory) -> FlowRun:  # noqa: ANN001
    """The sample evaluated through the `evaluate` flow against the faulty demo, with a bearer token
    from an environment variable in the headers."""
    from flows.evaluate import evaluate

    tmp = tmp_path_factory.mktemp("flow")
    token = "tok-" + secrets.token_urlsafe(24)
    config = write_config(tmp / "demo.yaml", fault_demo.port, retries=1, backoff_s=0.01, max_backoff_s=0.05,
                          timeout_s=TIMEOUT_S,
                          headers={"Authorization": f"Bearer ${{{SECRET_VAR}}}", "X-Client": "raglake"})
    lake = tmp / "lake"
    previous = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = token
    try:
        fault_demo.reset()
        run_id = evaluate(golden=str(SAMPLE_GOLDEN), target=f"http:{config}", lake=str(lake), metrics=FLOW_METRICS)
        log = list(fault_demo.log)
    finally:
        if previous is None:
            os.environ.pop(SECRET_VAR, None)
        else:
            os.environ[SECRET_VAR] = previous
    # the token really went out, on the manifest request and on every query
    assert {auth for _, _, auth in log} == {f"Bearer {token}"}
    assert {path for _, path, _ in log} == {"/debug/index", "/debug/query"}
    return FlowRun(run_id, lake, token, 1)


def _queries(run: FlowRun):  # noqa: ANN202
    from raglake.analysis import LakeQueries
    from raglake.lake.store import Lake

    return LakeQueries(Lake(str(run.lake)))


@pytest.mark.flow
def test_flow_lands_one_cases_row_per_golden_case(flow_run: FlowRun, golden, fault_demo: Demo) -> None:
    from raglake.lake.query import fetch

    q = _queries(flow_run)
    assert fetch(q.con, "SELECT count(*) FROM runs WHERE run_id = $r", r=flow_run.run_id) == [(1,)]
    rows = fetch(q.con, "SELECT case_id, question, capture_status, capture_error, capture_attempts FROM cases "
                 "WHERE run_id = $r", r=flow_run.run_id)
    assert sorted(r[0] for r in rows) == sorted(c.id for c in golden.cases)  # each case once, none missing
    faults = fault_demo.faults
    for case_id, question, status, error, attempts in rows:
        assert status == expected_status(faults, question), case_id
        assert attempts == expected_attempts(faults, question, flow_run.retries), case_id
        assert (error is None) == (status in ("ok", "empty")), case_id
        if faults.fault_for(question) == "malformed":
            assert error.startswith("malformed JSON response: Unterminated string")
    (n_cases,) = fetch(q.con, "SELECT n_cases FROM runs WHERE run_id = $r", r=flow_run.run_id)[0]
    assert n_cases == len(golden.cases)


@pytest.mark.flow
def test_failed_captures_are_undefined_with_reason_capture_failed(flow_run: FlowRun, golden) -> None:
    from raglake.lake.query import fetch

    q = _queries(flow_run)
    rows = fetch(q.con, "SELECT c.capture_status, s.metric, s.status, s.reason, s.value FROM scores s "
                 "JOIN cases c ON c.run_id = s.run_id AND c.case_id = s.case_id WHERE s.run_id = $r", r=flow_run.run_id)
    assert len(rows) == len(golden.cases) * len(FLOW_METRICS)
    failed = [r for r in rows if r[0] in ("error", "timeout")]
    # undefined scores carry NaN (the project's convention, see tests/test_lake.py), never a 0 for "wrong"
    assert failed and all(r[2] == "undefined" and r[3] == "capture_failed" and math.isnan(r[4]) for r in failed)
    assert not [r for r in rows if r[0] not in ("error", "timeout") and r[3] == "capture_failed"]
    assert any(r[2] == "ok" for r in rows if r[0] == "empty")  # an empty answer is scored, not excused


@pytest.mark.flow
def test_run_metrics_hold_the_rates_and_latency_percentiles(flow_run: FlowRun, golden, fault_demo: Demo) -> None:
    from raglake.lake.query import fetch

    q = _queries(flow_run)
    n = len(golden.cases)
    kinds = Counter(fault_demo.faults.fault_for(c.question) for c in golden.cases)
    figures = {(r[0], r[1]): (r[2], r[3]) for r in fetch(
        q.con, "SELECT metric, stage, value, n FROM run_metrics WHERE run_id = $r", r=flow_run.run_id)}
    assert figures[("error_rate", None)] == (pytest.approx((kinds["error"] + kinds["malformed"]) / n), n)
    assert figures[("timeout_rate", None)] == (pytest.approx(kinds["timeout"] / n), n)
    assert figures[("empty_response_rate", None)] == (pytest.approx(kinds["empty"] / n), n)

    columns = {s: f"latency_{s}_ms" for s in ("folder_selection", "retrieval", "generation", "total", "wall")}
    rows = fetch(q.con, f"SELECT capture_status, {', '.join(columns.values())} FROM cases WHERE run_id = $r",
                 r=flow_run.run_id)
    for i, stage in enumerate(columns, start=1):
        values = [r[i] for r in rows if r[i] is not None and (stage == "wall" or r[0] not in ("error", "timeout"))]
        assert values, stage
        for metric, pct in (("latency_p50_ms", 50), ("latency_p95_ms", 95)):
            value, count = figures[(metric, stage)]
            assert count == len(values) and value == pytest.approx(float(np.percentile(values, pct))), (metric, stage)
    assert len([v for v in rows if v[0] == "timeout"]) == kinds["timeout"]
    # a timeout is a real wait: the wall p95 covers the retried hangs
    assert figures[("latency_p95_ms", "wall")][0] >= figures[("latency_p50_ms", "wall")][0]
    assert figures[("latency_p50_ms", "total")][0] < TIMEOUT_S * 1000


@pytest.mark.flow
def test_the_secret_is_in_no_file_under_the_lake(flow_run: FlowRun) -> None:
    import pyarrow.parquet as pq

    from raglake.lake.query import fetch
    from raglake.lake.store import Lake
    from raglake.runplan import journal_path

    token = flow_run.token.encode()
    files = [p for p in flow_run.lake.rglob("*") if p.is_file()]
    parquet = [p for p in files if p.suffix == ".parquet"]
    assert len(parquet) >= 6 and any("_results" in p.parts for p in files)  # tables and Prefect's task results
    assert [p for p in files if token in p.read_bytes()] == []
    for p in parquet:  # and not hidden by compression either
        assert flow_run.token not in json.dumps(pq.read_table(p).to_pylist(), default=str), p
    journal = Path(journal_path(Lake(str(flow_run.lake)), flow_run.run_id))
    assert journal.exists() and token not in journal.read_bytes()

    q = _queries(flow_run)
    (config_json,) = fetch(q.con, "SELECT config_json FROM runs WHERE run_id = $r", r=flow_run.run_id)[0]
    recorded = json.loads(config_json)["target_config"]
    assert recorded["headers"] == {"Authorization": f"<from ${{{SECRET_VAR}}}>", "X-Client": "<redacted>"}
    assert recorded["url"].endswith("/debug/query") and recorded["retries"] == 1


@pytest.mark.flow
def test_coverage_holds_the_service_manifest(flow_run: FlowRun, fault_demo: Demo, corpus: Path) -> None:
    manifest = fault_demo.target.manifest()
    q = _queries(flow_run)
    assert q.index_versions([flow_run.run_id]) == {flow_run.run_id: manifest.index_version}
    rows = q.coverage(flow_run.run_id)
    assert {r["index_version"] for r in rows} == {manifest.index_version}
    want = manifest.coverage_columns()
    landed = sorted((r["stat"], r["doc_type"] or "", r["reason"] or "", r["value"]) for r in rows)
    served = sorted((s, d or "", why or "", v)
                    for s, d, why, v in zip(want["stat"], want["doc_type"], want["reason"], want["value"]))
    assert landed == served
    stats = {(r["stat"], r["doc_type"], r["reason"]): r["value"] for r in rows}
    assert stats[("docs_seen", None, None)] == len(CORPUS_SUBSET)
    assert stats[("docs_with_zero_chunks", None, None)] >= 2  # the empty note and the front-matter-only one
    assert stats[("docs_not_indexed", None, "unsupported_type")] == 1
    from raglake.lake.query import fetch

    (info,) = fetch(q.con, "SELECT index_info FROM runs WHERE run_id = $r", r=flow_run.run_id)[0]
    assert json.loads(info)["chunks_embedded"] == manifest.chunks_embedded


@pytest.mark.flow
def test_capture_health_by_category(flow_run: FlowRun, golden, fault_demo: Demo) -> None:
    faults = fault_demo.faults
    by_category: dict[str, Counter] = {}
    for case in golden.cases:
        counts = by_category.setdefault(case.category or "(none)", Counter())
        counts["n"] += 1
        counts[expected_status(faults, case.question)] += 1
    rows = _queries(flow_run).capture_health([flow_run.run_id], "category")
    assert {r["slice"] for r in rows} == set(by_category)
    for r in rows:
        want = by_category[r["slice"]]
        assert r["n_cases"] == want["n"]
        assert r["error_rate"] == pytest.approx(want["error"] / want["n"]), r
        assert r["timeout_rate"] == pytest.approx(want["timeout"] / want["n"]), r
        assert r["empty_response_rate"] == pytest.approx(want["empty"] / want["n"]), r
    (overall,) = _queries(flow_run).capture_health([flow_run.run_id], "all")
    assert overall["n_cases"] == len(golden.cases)

    # the breakdown query (what `raglake breakdown` prints) counts the excused cases per slice
    breakdown = _queries(flow_run).breakdown([flow_run.run_id], "category")
    for r in breakdown:
        want = by_category[r["slice"]]
        failed = want["error"] + want["timeout"]
        assert r["n_undefined"] >= failed
        if failed and r["metric"] == "recall_any_at_k":
            assert r["n"] + r["n_undefined"] == want["n"]


@pytest.mark.flow
def test_compare_reports_an_index_version_change(flow_run: FlowRun, corpus: Path, golden, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from flows.evaluate import evaluate
    from raglake.cli import app
    from raglake.demo.app import Faults

    changed = tmp_path / "corpus"
    shutil.copytree(corpus, changed)
    note = changed / "work" / "projects" / "beacon.md"
    note.write_text(note.read_text() + "\n## Budget\n\nBeacon's 2025 budget was cut to 40k EUR in the autumn review.\n")
    demo = start_demo(changed, str(tmp_path / "demo-lake"), Faults(), [c.question for c in golden.cases])
    try:
        config = write_config(tmp_path / "demo.yaml", demo.port, timeout_s=10, retries=1, backoff_s=0.01)
        run_b = evaluate(golden=str(SAMPLE_GOLDEN), target=f"http:{config}", lake=str(flow_run.lake),
                         metrics=FLOW_METRICS)
        new_version = demo.target.manifest().index_version
    finally:
        demo.stop()
    q = _queries(flow_run)
    old_version = q.index_versions([flow_run.run_id])[flow_run.run_id]
    assert new_version != old_version and q.index_versions([run_b])[run_b] == new_version

    result = CliRunner().invoke(app, ["compare", flow_run.run_id, run_b, "--lake", str(flow_run.lake)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert f"the index changed between the runs (index_version {old_version} → {new_version})" in out
    same = CliRunner().invoke(app, ["compare", flow_run.run_id, flow_run.run_id, "--lake", str(flow_run.lake)])
    assert same.exit_code == 0 and "the index changed" not in same.output
