"""The `http` target (issue 6) as units: its config file, body template, JSON-path mapping and retry
rules (against a mock transport). The demo service and the flow: tests/test_http_demo.py."""

import asyncio
import datetime as dt
import json
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from raglake.errors import InputError
from raglake.pipeline.settings import RunSettings
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
from tests.httpkit import (
    DEMO_CONFIG,
    SAMPLE_GOLDEN,
    free_port,
    write_config,
)

# ---- config file ---------------------------------------------------------------------------------

BAD_CONFIGS = [
    (
        "placeholder",
        'url: http://h/q\nname: x\nbody:\n  q: "{questin}"\n',
        3,
        "body",
        "unknown placeholder {questin} (did you mean 'question'?)",
    ),
    (
        "nested_placeholder",
        'url: http://h/q\nbody:\n  meta: ["{case_id}", "{catgory}"]\n',
        2,
        "body",
        "unknown placeholder {catgory} (did you mean 'category'?)",
    ),
    (
        "latency_stage",
        "url: http://h/q\nresponse:\n  answer: a\n  latency_ms:\n    retreival: t.r\n",
        2,
        "response.latency_ms",
        "unknown latency stage 'retreival' (did you mean 'retrieval'?)",
    ),
    ("method", "url: http://h/q\n\nmethod: DELETE\n", 3, "method", "method must be GET, POST or PUT, got 'DELETE'"),
    (
        "unknown_field",
        "url: http://h/q\nconcurency: 4\n",
        2,
        "concurency",
        "unknown field (did you mean 'concurrency'?)",
    ),
    (
        "nested_unknown_field",
        "url: http://h/q\nresponse:\n  anwser: a\n",
        2,
        "response.anwser",
        "unknown field (did you mean 'answer'?)",
    ),
    ("url_scheme", "name: x\nurl: ftp://h/q\n", 2, "url", "should match pattern"),
    ("missing_url", "name: x\nretries: 2\n", 1, "url", "required field is missing"),
    ("timeout", "url: http://h/q\ntimeout_s: 0\n", 2, "timeout_s", "greater than 0"),
    ("concurrency", "url: http://h/q\nconcurrency: 0\n", 2, "concurrency", "greater than or equal to 1"),
]


@pytest.mark.parametrize(("name", "text", "line", "field", "words"), BAD_CONFIGS, ids=[b[0] for b in BAD_CONFIGS])
def test_bad_config_names_file_line_and_field(
    tmp_path: Path, name: str, text: str, line: int, field: str, words: str
) -> None:
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
    config = HttpTargetConfig(
        url="http://h/q",
        headers={
            "Authorization": "Bearer ${RAGLAKE_UNIT_TOKEN}",
            "X-Pair": "${RAGLAKE_UNIT_TENANT}:${RAGLAKE_UNIT_TOKEN}",
            "X-Literal": "plain-api-key",
        },
    )
    assert config.resolved_headers() == {
        "Authorization": "Bearer s3cr3t-value",
        "X-Pair": "tenant-7:s3cr3t-value",
        "X-Literal": "plain-api-key",
    }
    recorded = config.secret_free()
    assert recorded["headers"] == {
        "Authorization": "<from ${RAGLAKE_UNIT_TOKEN}>",
        "X-Pair": "<from ${RAGLAKE_UNIT_TENANT, RAGLAKE_UNIT_TOKEN}>",
        "X-Literal": "<redacted>",
    }
    text = json.dumps(recorded)
    assert "s3cr3t-value" not in text and "plain-api-key" not in text and "tenant-7" not in text
    before = config.fingerprint()
    monkeypatch.setenv("RAGLAKE_UNIT_TOKEN", "rotated")
    assert config.fingerprint() == before  # rotating a token does not make a different target


def test_missing_env_var_fails_the_check_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    from raglake.pipeline.plan import plan_run

    monkeypatch.delenv("RAGLAKE_UNSET_TOKEN", raising=False)
    config = write_config(
        tmp_path / "svc.yaml", free_port(), headers={"Authorization": "Bearer ${RAGLAKE_UNSET_TOKEN}"}
    )
    lake = tmp_path / "lake"
    with pytest.raises(
        InputError, match=r"needs environment variable \$\{RAGLAKE_UNSET_TOKEN\}, which is not set"
    ) as info:
        plan_run(RunSettings(target=f"http:{config}", golden=str(SAMPLE_GOLDEN), lake=str(lake)))
    line = next(i for i, text in enumerate(config.read_text().splitlines(), start=1) if "Authorization:" in text)
    assert (info.value.path, info.value.line, info.value.field) == (str(config), line, "headers.Authorization")
    assert not lake.exists()


# ---- body template, JSON paths ---------------------------------------------------------------------


def test_render_body() -> None:
    values = {
        "question": "Who owns Atlas?",
        "case_id": "c-1",
        "category": None,
        "difficulty": "easy",
        "vault": "work",
        "tags": ["atlas", "db"],
        "k": 5,
    }
    template = {
        "q": "{question}",
        "tags": "{tags}",
        "k": "{k}",
        "prompt": "[{case_id}] {question} (k={k})",
        "cat": "{category}",
        "label": "cat={category};",
        "nested": [{"v": "{vault}"}, 3, True, None],
        "literal": "no placeholders",
        "braces": "{not a field}",
    }
    assert render_body(template, values) == {
        "q": "Who owns Atlas?",
        "tags": ["atlas", "db"],
        "k": 5,
        "prompt": "[c-1] Who owns Atlas? (k=5)",
        "cat": None,
        "label": "cat=;",
        "nested": [{"v": "work"}, 3, True, None],
        "literal": "no placeholders",
        "braces": "{not a field}",
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
        "answer": "Atlas runs on db.r6g.xlarge.",
        "abstained": False,
        "references": [{"rel_path": "work/projects/atlas.md", "heading_path": "Project Atlas > Decisions"}],
        "chunks": [
            {"rank": 2, "rel_path": "b.md", "heading_path": "B", "text": "bee", "score": 0.5},
            {
                "rank": 1,
                "rel_path": "work/projects/atlas.md",
                "heading_path": ["Project Atlas", "Decisions"],
                "text": "db.r6g.xlarge",
                "score": 0.9,
            },
        ],
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
    by_order = config.model_copy(
        update={
            "response": config.response.model_copy(
                update={"chunk": config.response.chunk.model_copy(update={"rank": None})}
            )
        }
    )
    assert [c["rank"] for c in map_response(_debug_body(), by_order, "c-3")["retrieved"]] == [1, 2]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"answer": 42}, "answer at 'answer' is a int, expected str"),
        ({"abstained": "no"}, "abstained at 'abstained' is a str, expected bool"),
        ({"chunks": {"rank": 1}}, "retrieved chunks at 'chunks' is a dict, expected list"),
        ({"chunks": [{"rank": True, "rel_path": "a.md"}]}, "chunk rank at 'rank' is a bool, expected int"),
        (
            {"chunks": [{"rank": 1, "rel_path": "a.md", "score": "high"}]},
            "chunk score at 'score' is a str, expected int or float",
        ),
        ({"timings": {"total_ms": "16"}}, "latency total at 'timings.total_ms' is a str, expected int or float"),
    ],
)
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
            return await fetch_capture(
                client, cfg, {"X-Client": "test"}, case or GoldenCase(id="c-1", question="q?"), 5, sleep=sleep
            )

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
    _, seen, _ = _fetch(
        lambda r, n: httpx.Response(200, json=_debug_body()), method="GET", body={"q": "{question}", "k": "{k}"}
    )
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
    capture, seen, _ = _fetch(
        lambda r, n: httpx.Response(200, text='{"answer": "cut', headers={"content-type": "application/json"})
    )
    assert capture.status == "error" and capture.attempts == 1 == len(seen)
    assert capture.error.startswith("malformed JSON response: Unterminated string starting at")
    assert "line 1 column 12" in capture.error

    capture, seen, _ = _fetch(lambda r, n: httpx.Response(200, json=_debug_body(answer=["a", "b"])))
    assert capture.status == "error" and capture.attempts == 1 == len(seen)
    assert capture.error == (
        "response does not map onto a capture: answer at 'answer' is a list, expected str (after 1 attempt(s))"
    )

    capture, _, _ = _fetch(
        lambda r, n: httpx.Response(
            200, json=_debug_body(chunks=[{"rank": 1, "rel_path": "a.md"}, {"rank": 1, "rel_path": "b.md"}])
        )
    )
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
