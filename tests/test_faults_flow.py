"""A whole run through the `evaluate` flow against a live service and a judge that misbehave (issue 10):
the service answers one case with an HTML page and resets the connection mid-body on another's first
request; the judge answers one case with a malformed envelope, every time. The run lands: that case's
capture is `error`, the reset case was retried and is ok, the judge case is `judge_error` with the
reason, every other case is ok; and no more than `concurrency` requests reached the service at once
although its batches were captured on the flow's threads."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.pipeline.settings import RunSettings
from tests.fake_openai import canned_reply, completion, ok
from tests.faultkit import (
    Answer,
    FaultServer,
    Request,
    html_page,
    json_answer,
    malformed,
    reset_mid_body,
    service_body,
    service_config,
)

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

IDS = [f"f{i}" for i in range(1, 9)]
HTML, RESET, BAD_JUDGE = "f2", "f5", "f7"
CONCURRENCY = 2


def write_golden(folder: Path) -> str:
    rows = [
        {
            "id": cid,
            "question": f"What about {cid}?",
            "reference_answer": f"answer to {cid}",
            "gold_supports": [{"rel_path": "notes/a.md", "heading_path": "A"}],
        }
        for cid in IDS
    ]
    path = folder / "golden.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def service() -> FaultServer:
    reset_done = threading.Event()

    def respond(request: Request) -> Answer:
        cid = request.json()["case_id"]
        if cid == HTML:
            return html_page()
        if cid == RESET and not reset_done.is_set():
            reset_done.set()
            return reset_mid_body(service_body(cid))
        return json_answer(service_body(cid), delay_s=0.05)

    return FaultServer(respond)


def judge() -> FaultServer:
    def respond(request: Request) -> Answer:
        body = request.json()
        if any(f"answer to {BAD_JUDGE}" in m["content"] for m in body["messages"]):
            return malformed(completion(ok({"score": 4}), body))
        return json_answer(completion(canned_reply(body), body))

    return FaultServer(respond)


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory) -> dict[str, Any]:
    from raglake.flows.evaluate import evaluate

    tmp = tmp_path_factory.mktemp("faulty")
    lake = str(tmp / "lake")
    with service() as svc, judge() as llm:
        config = service_config(tmp, svc.port, concurrency=CONCURRENCY)
        run_id = evaluate(
            RunSettings(
                golden=write_golden(tmp),
                target=f"http:{config}",
                lake=lake,
                batch_size=2,
                metrics=["recall_any_at_k", "groundedness"],
                judge={"base_url": llm.url("/v1"), "model": "gpt-4o-mini", "backoff_s": 0.01, "max_retries": 1},
            )
        )
        return {
            "lake": lake,
            "run_id": run_id,
            "service_max_in_flight": svc.max_in_flight,
            "service_requests": [r.json()["case_id"] for r in svc.requests],
            "judge_requests": llm.count,
        }


def test_the_run_lands_with_each_failure_on_its_own_case(faulty_run):
    con = connect(Lake(faulty_run["lake"]))
    cases = {
        cid: (status, error, attempts)
        for cid, status, error, attempts in fetch(
            con,
            "SELECT case_id, capture_status, capture_error, capture_attempts FROM cases WHERE run_id = $r",
            r=faulty_run["run_id"],
        )
    }
    assert sorted(cases) == IDS
    status, error, attempts = cases[HTML]
    assert status == "error" and "malformed JSON response" in error and attempts == 1
    assert cases[RESET][0] == "ok" and cases[RESET][2] == 2  # the reset was retried
    assert all(cases[cid][0] == "ok" for cid in IDS if cid != HTML)
    assert sorted(faulty_run["service_requests"]) == sorted(IDS + [RESET])


def test_a_malformed_judge_reply_is_that_cases_judge_error_and_the_others_are_ok(faulty_run):
    rows = {
        cid: (status, reason)
        for cid, status, reason in fetch(
            connect(Lake(faulty_run["lake"])),
            "SELECT case_id, status, reason FROM scores WHERE run_id = $r AND metric = 'groundedness'",
            r=faulty_run["run_id"],
        )
    }
    assert sorted(rows) == IDS
    status, reason = rows[BAD_JUDGE]
    assert status == "judge_error" and "malformed reply" in reason and "(after 2 attempt(s))" in reason, reason
    assert rows[HTML][0] != "ok"  # no capture, nothing to judge
    assert {cid: s for cid, (s, _) in rows.items() if cid not in (HTML, BAD_JUDGE)} == {
        cid: "ok" for cid in IDS if cid not in (HTML, BAD_JUDGE)
    }
    # one call per judged case, the bad one asked twice (max_retries 1)
    assert faulty_run["judge_requests"] == len(IDS) - 1 + 1
    [(retries,)] = fetch(
        connect(Lake(faulty_run["lake"])),
        "SELECT retries FROM judge_calls WHERE run_id = $r AND status = 'judge_error'",
        r=faulty_run["run_id"],
    )
    assert retries == 1
    [(calls,)] = fetch(
        connect(Lake(faulty_run["lake"])),
        "SELECT value FROM run_metrics WHERE run_id = $r AND metric = 'judge_calls'",
        r=faulty_run["run_id"],
    )
    assert calls == faulty_run["judge_requests"]  # the run's figure counts the retry


def test_the_services_concurrency_held_across_the_runs_batches(faulty_run):
    assert faulty_run["service_max_in_flight"] == CONCURRENCY
