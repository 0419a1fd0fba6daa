"""A live service that answers HTTP 200 with an HTML page, a cut-off JSON envelope, bytes that are not
UTF-8 or JSON nested too deeply, or resets the connection mid-body (issue 10): that case's capture is an
`error` with the reason and every other case is captured. An unexpected exception while capturing one
case (http mapping, builtin target) is that case's error, naming the exception. A config whose header
variable is unset or whose manifest cannot be read gives an error naming the config file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from raglake.builtin.rag import METHOD
from raglake.errors import InputError
from raglake.schemas import Capture
from raglake.targets import http_client
from raglake.targets.builtin import BuiltinTarget
from raglake.targets.http import HttpTarget
from tests.faultkit import (
    Answer,
    FaultServer,
    Request,
    golden_cases,
    html_page,
    json_answer,
    malformed,
    not_utf8,
    reset_mid_body,
    service_body,
    service_config,
    too_deep,
)

# case id -> (what the service answers it, every time; capture status; words of the error; attempts)
FAULTS = {
    "html": (html_page(), "error", "malformed JSON response: Expecting value (line 1 column 1)", 1),
    "html_said_to_be_json": (html_page(content_type="application/json"), "error", "malformed JSON response", 1),
    "truncated": (malformed(service_body("truncated")), "error", "malformed JSON response: Unterminated string", 1),
    "not_utf8": (not_utf8(), "error", "malformed JSON response: not UTF-8", 1),
    "too_deep": (too_deep(), "error", "malformed JSON response: nested too deeply", 1),
    "wrong_shape": (json_answer({"answer": ["a", "b"]}), "error", "response does not map onto a capture", 1),
    "reset": (reset_mid_body(service_body("reset")), "error", "connection error", 2),
}
GOOD = ("g1", "g2", "g3")


def respond(request: Request) -> Answer:
    if request.method == "GET":  # the manifest
        return html_page()
    case_id = request.json()["case_id"]
    return FAULTS[case_id][0] if case_id in FAULTS else json_answer(service_body(case_id))


@pytest.fixture
def server():
    with FaultServer(respond) as s:
        yield s


def test_each_bad_reply_is_that_cases_error_and_every_other_case_is_captured(server, tmp_path: Path):
    target = HttpTarget(str(service_config(tmp_path, server.port)))
    ids = [GOOD[0], *FAULTS, *GOOD[1:]]
    captures = target.capture(golden_cases(ids))
    assert [c.case_id for c in captures] == ids
    by_id = {c.case_id: c for c in captures}
    for cid, (_, status, words, attempts) in FAULTS.items():
        c = by_id[cid]
        assert (c.status, c.attempts) == (status, attempts), (cid, c.status, c.error)
        assert words in c.error and f"(after {attempts} attempt(s))" in c.error, (cid, c.error)
        assert c.answer == "" and c.retrieved == []
    for cid in GOOD:
        assert by_id[cid].status == "ok" and by_id[cid].answer == f"answer to {cid}", by_id[cid].error
    asked = [r.json()["case_id"] for r in server.requests]
    assert sorted(asked) == sorted(ids + ["reset"])  # the reset case was retried once; nothing else was


def test_an_unexpected_exception_while_mapping_one_case_is_that_cases_error(server, tmp_path: Path, monkeypatch):
    real = http_client.map_response

    def mapping(data: Any, config: Any, case_id: str) -> dict[str, Any]:
        if case_id == "g2":
            return {}["no such key"]  # a programming error in the mapping
        return real(data, config, case_id)

    monkeypatch.setattr(http_client, "map_response", mapping)
    target = HttpTarget(str(service_config(tmp_path, server.port)))
    captures = target.capture(golden_cases(GOOD))
    assert [c.status for c in captures] == ["ok", "error", "ok"]
    error = captures[1].error
    assert error.startswith("unexpected KeyError: 'no such key'") and "test_faults_http.py" in error, error
    assert captures[1].method == "faulty"


class _Rag:
    """Stands in for the builtin target's reference RAG: one question breaks it."""

    class encoder:
        @staticmethod
        def encode(texts: list[str], caller: str = "") -> list[None]:
            return [None] * len(texts)

    def query(self, case_id: str, vector: Any, encode_ms: float) -> Capture:
        if case_id == "b2":
            raise ZeroDivisionError("division by zero")
        return Capture(case_id=case_id, answer=f"answer to {case_id}", method=METHOD)


def test_an_unexpected_exception_in_one_builtin_query_is_that_cases_error(tmp_path: Path):
    target = BuiltinTarget(str(tmp_path), str(tmp_path / "lake"))
    target._rag = _Rag()
    captures = target.capture(golden_cases(["b1", "b2", "b3"]))
    assert [c.case_id for c in captures] == ["b1", "b2", "b3"]
    assert [c.status for c in captures] == ["ok", "error", "ok"]
    assert captures[1].error.startswith("unexpected ZeroDivisionError: division by zero"), captures[1].error
    assert captures[1].method == METHOD and captures[1].latency_ms.wall is not None


# ---- the config file named in errors that come after loading it ----------------------------------


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_a_missing_header_variable_names_the_config_file_and_line(tmp_path: Path, monkeypatch):
    monkeypatch.delenv("RAGLAKE_FAULTS_UNSET", raising=False)
    path = service_config(tmp_path, 9, headers={"X-Tenant": "t-1", "Authorization": "Bearer ${RAGLAKE_FAULTS_UNSET}"})
    target = HttpTarget(str(path))
    with pytest.raises(InputError) as info:
        target.check(None)
    e = info.value
    assert (e.path, e.line, e.field) == (str(path), _line_of(path, "Authorization:"), "headers.Authorization")
    assert "needs environment variable ${RAGLAKE_FAULTS_UNSET}, which is not set" in str(e)
    assert str(e).startswith(f"{path}:{e.line}: field 'headers.Authorization':")


def test_an_unreachable_manifest_url_names_the_config_file_and_line(tmp_path: Path):
    with FaultServer(respond) as closed:  # a port that nothing listens on once this block ends
        port = closed.port
    path = service_config(tmp_path, 9, manifest_url=f"http://127.0.0.1:{port}/index")
    with pytest.raises(InputError) as info:
        HttpTarget(str(path)).check(None)
    e = info.value
    assert (e.path, e.line, e.field) == (str(path), _line_of(path, "manifest_url:"), "manifest_url")
    assert f"cannot read the index manifest from http://127.0.0.1:{port}/index" in str(e)


def test_a_manifest_url_answering_html_names_the_config_file_and_line(server, tmp_path: Path):
    path = service_config(tmp_path, server.port, manifest_url=server.url("/index"))
    with pytest.raises(InputError) as info:
        HttpTarget(str(path)).check(None)
    e = info.value
    assert (e.path, e.line, e.field) == (str(path), _line_of(path, "manifest_url:"), "manifest_url")
    assert "cannot read the index manifest from" in str(e) and "Expecting value" in str(e)


def test_a_missing_manifest_file_names_the_config_file_and_line(server, tmp_path: Path):
    path = service_config(tmp_path, server.port, manifest_file="missing-manifest.json")
    with pytest.raises(InputError) as info:
        HttpTarget(str(path)).check(None)
    e = info.value
    assert (e.path, e.line, e.field) == (str(path), _line_of(path, "manifest_file:"), "manifest_file")
    assert "missing-manifest.json" in str(e)
