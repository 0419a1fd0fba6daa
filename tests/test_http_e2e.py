"""A run against a live service that is killed mid-capture and started again with the same run id
(issue 6): no case lost, none duplicated, and what was captured before the kill is not asked again.

`raglake run` runs as a subprocess (as a scheduler runs it) against the demo service, served in this
process with 300 ms of latency per request so the kill lands mid-capture. The subprocesses report to
the session's Prefect test server (PREFECT_API_URL), as runs on a deployment report to theirs: each
then takes about 5 s instead of the 20 s that starting a private ephemeral server costs here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from raglake.golden import load_golden
from raglake.lake.landing import is_committed
from raglake.lake.query import fetch
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.plan import journal_path
from raglake.targets.journal import CaptureJournal
from tests.conftest import ROOT
from tests.httpkit import SAMPLE_GOLDEN, small_corpus, start_demo, write_config

RUN_ID = "r-killed"
N_CASES = 16
LATENCY_MS = 300


@pytest.fixture(scope="module")
def slow_demo(tmp_path_factory):  # noqa: ANN001, ANN201
    from raglake.demo.app import Faults

    corpus = small_corpus(tmp_path_factory.mktemp("corpus"))
    questions = [c.question for c in load_golden(SAMPLE_GOLDEN).cases[:N_CASES]]
    demo = start_demo(corpus, str(tmp_path_factory.mktemp("demo-lake")), Faults(latency_ms=LATENCY_MS), questions)
    yield demo
    demo.stop()


def _journal_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _settled(demo) -> Counter:  # noqa: ANN001 - httpkit.Demo
    """The demo's requests per question once it has read every request the killed run sent: a request in
    flight at the kill can reach the handler (which counts it on arrival) after the kill returns, so the
    counts are read when they have not moved for a second (the demo's latency is 0.3 s)."""
    before = Counter(demo.requests)
    while True:
        time.sleep(1.0)
        now = Counter(demo.requests)
        if now == before:
            return now
        before = now


@pytest.mark.e2e
def test_a_killed_run_resumes_without_losing_duplicating_or_asking_again(
    prefect_harness,
    slow_demo,  # noqa: ANN001
    tmp_path: Path,
) -> None:
    from prefect.settings import PREFECT_API_URL

    lines = SAMPLE_GOLDEN.read_text().splitlines()[:N_CASES]
    golden = tmp_path / "golden.jsonl"
    golden.write_text("\n".join(lines) + "\n")
    cases = load_golden(golden).cases
    assert len({c.question for c in cases}) == N_CASES  # the demo counts requests per question
    config = write_config(
        tmp_path / "demo.yaml", slow_demo.port, concurrency=2, timeout_s=30, retries=1, backoff_s=0.05
    )
    lake = tmp_path / "lake"
    journal = Path(journal_path(Lake(str(lake)), RUN_ID))
    journal.unlink(missing_ok=True)  # the journal lives in the session's cache, not in this test's folder
    command = [
        sys.executable,
        "-m",
        "raglake",
        "run",
        "--golden",
        str(golden),
        "--target",
        f"http:{config}",
        "--run-id",
        RUN_ID,
        "--lake",
        str(lake),
        "-m",
        "recall_any_at_k",
    ]
    env = {**os.environ, "COLUMNS": "200", "PREFECT_API_URL": PREFECT_API_URL.value()}
    slow_demo.reset()

    # first attempt: killed (with everything it started) once a few captures are journalled
    log = tmp_path / "killed.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )  # its own process group: the kill takes its children too
        try:
            deadline = time.monotonic() + 240
            while _journal_lines(journal) < 3:
                if proc.poll() is not None:
                    pytest.fail(f"the run ended (exit {proc.returncode}) before it could be killed:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"no captures journalled within 240 s:\n{log.read_text()}")
                time.sleep(0.01)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    asked_before = _settled(slow_demo)  # a request in flight at the kill counts as asked before
    done = CaptureJournal(journal).load()
    assert 0 < len(done) < N_CASES, f"{len(done)} of {N_CASES} captured before the kill"
    assert set(done) <= {c.id for c in cases}
    assert not is_committed(Lake(str(lake)), RUN_ID)
    if lake.exists():
        assert open_lake(str(lake)).runs() == []

    # second attempt: the same command, to completion
    second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, f"{second.stdout}\n{second.stderr}"
    assert f"landed run(s): {RUN_ID}" in second.stdout

    q = open_lake(str(lake))
    assert [r["run_id"] for r in q.runs()] == [RUN_ID]
    assert len(Lake(str(lake)).files("runs")) == 1
    rows = fetch(
        q.con,
        "SELECT case_id, question, capture_status, capture_attempts, latency_wall_ms FROM cases WHERE run_id = $r",
        r=RUN_ID,
    )
    assert sorted(r[0] for r in rows) == sorted(c.id for c in cases)  # none lost, none duplicated
    assert {r[2] for r in rows} == {"ok"}
    # the captures from before the kill are the ones landed (same measured wall time), not new ones
    landed = {r[0]: r[4] for r in rows}
    for case_id, (_, capture) in done.items():
        assert landed[case_id] == capture.latency_ms.wall, case_id

    asked = slow_demo.requests
    by_id = {c.id: c.question for c in cases}
    for case in cases:
        if case.id in done:
            assert asked[case.question] == 1, f"{case.id} was captured before the kill but asked again"
        else:  # asked once by the second run (a request in flight at the kill was asked once before, too)
            assert asked[case.question] - asked_before[case.question] == 1, case.id
    assert sum(asked_before.values()) - len(done) <= 2  # at most `concurrency` requests were cut off
    assert set(asked) == set(by_id.values())
