"""The `http` target against the demo service (`raglake serve-demo`'s app, started in-process on a free
loopback port) with sticky fault injection: every case captured once with the injected status,
retries where they belong, the run-level rates equal to the injected counts; then through the
`evaluate` flow: one cases row per golden case, `capture_failed` scores, run_metrics, no secret in
any file of the lake, the service's manifest in `coverage`, capture health by slice, and
`raglake compare` noticing that the index changed."""

import json
import math
import os
import secrets
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from raglake.golden import load_golden
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import RunSettings
from tests.httpkit import (
    CORPUS_SUBSET,
    FAULTS,
    FLOW_METRICS,
    HANG_S,
    SAMPLE_GOLDEN,
    TIMEOUT_S,
    Demo,
    expected_attempts,
    expected_status,
    free_port,
    is_flaky,
    small_corpus,
    start_demo,
    write_config,
)

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

    config = write_config(
        tmp_path_factory.mktemp("cfg") / "faulty.yaml",
        fault_demo.port,
        retries=2,
        backoff_s=0.01,
        max_backoff_s=0.05,
        timeout_s=TIMEOUT_S,
        concurrency=8,
    )
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
    assert all(
        c.status != "ok" or (c.answer and c.retrieved and c.latency_ms.total is not None) for c in captured.captures
    )
    # the demo got no question it was not asked, and every asked question at least once
    assert set(captured.requests) == {c.question for c in golden.cases}


def test_malformed_response_is_an_error_with_the_parse_message(captured: Captured, golden, fault_demo: Demo) -> None:
    malformed = [
        cap
        for case, cap in zip(golden.cases, captured.captures)
        if fault_demo.faults.fault_for(case.question) == "malformed"
    ]
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
    flaky = [
        (case, cap)
        for case, cap in zip(golden.cases, captured.captures)
        if is_flaky(fault_demo.faults, case.question) and fault_demo.faults.fault_for(case.question) is None
    ]
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
    assert stages == {
        "folder_selection": ok_or_empty,
        "retrieval": ok_or_empty,
        "generation": ok_or_empty,
        "total": ok_or_empty,
        "wall": n,
    }


@pytest.mark.parametrize(
    ("url_path", "overrides", "code"),
    [
        ("/debug/nope", {}, 404),
        ("/debug/query", {"method": "GET"}, 405),
        ("/debug/query", {"body": {"q": "{question}"}}, 422),
    ],
)
def test_a_client_error_is_not_retried(
    fault_demo: Demo, golden, tmp_path: Path, url_path: str, overrides: dict, code: int
) -> None:
    from raglake.targets.http import HttpTarget

    config = write_config(
        tmp_path / "wrong.yaml", fault_demo.port, retries=3, backoff_s=0.01, timeout_s=TIMEOUT_S, **overrides
    )
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

    config = write_config(
        tmp_path / "closed.yaml",
        free_port(),
        retries=2,
        backoff_s=0.01,
        max_backoff_s=0.02,
        timeout_s=TIMEOUT_S,
        manifest_url=None,
    )
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
    from raglake.flows.evaluate import evaluate

    tmp = tmp_path_factory.mktemp("flow")
    token = "tok-" + secrets.token_urlsafe(24)
    config = write_config(
        tmp / "demo.yaml",
        fault_demo.port,
        retries=1,
        backoff_s=0.01,
        max_backoff_s=0.05,
        timeout_s=TIMEOUT_S,
        headers={"Authorization": f"Bearer ${{{SECRET_VAR}}}", "X-Client": "raglake"},
    )
    lake = tmp / "lake"
    previous = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = token
    try:
        fault_demo.reset()
        run_id = evaluate(
            RunSettings(golden=str(SAMPLE_GOLDEN), target=f"http:{config}", lake=str(lake), metrics=FLOW_METRICS)
        )
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

    return open_lake(str(run.lake))


@pytest.mark.flow
def test_flow_lands_one_cases_row_per_golden_case(flow_run: FlowRun, golden, fault_demo: Demo) -> None:
    from raglake.lake.query import fetch

    q = _queries(flow_run)
    assert fetch(q.con, "SELECT count(*) FROM runs WHERE run_id = $r", r=flow_run.run_id) == [(1,)]
    rows = fetch(
        q.con,
        "SELECT case_id, question, capture_status, capture_error, capture_attempts FROM cases WHERE run_id = $r",
        r=flow_run.run_id,
    )
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
    rows = fetch(
        q.con,
        "SELECT c.capture_status, s.metric, s.status, s.reason, s.value FROM scores s "
        "JOIN cases c ON c.run_id = s.run_id AND c.case_id = s.case_id WHERE s.run_id = $r",
        r=flow_run.run_id,
    )
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
    figures = {
        (r[0], r[1]): (r[2], r[3])
        for r in fetch(q.con, "SELECT metric, stage, value, n FROM run_metrics WHERE run_id = $r", r=flow_run.run_id)
    }
    assert figures[("error_rate", None)] == (pytest.approx((kinds["error"] + kinds["malformed"]) / n), n)
    assert figures[("timeout_rate", None)] == (pytest.approx(kinds["timeout"] / n), n)
    assert figures[("empty_response_rate", None)] == (pytest.approx(kinds["empty"] / n), n)

    columns = {s: f"latency_{s}_ms" for s in ("folder_selection", "retrieval", "generation", "total", "wall")}
    rows = fetch(
        q.con, f"SELECT capture_status, {', '.join(columns.values())} FROM cases WHERE run_id = $r", r=flow_run.run_id
    )
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
    from raglake.pipeline.plan import journal_path

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
    served = sorted(
        (s, d or "", why or "", v)
        for s, d, why, v in zip(want["stat"], want["doc_type"], want["reason"], want["value"])
    )
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

    from raglake.cli import app
    from raglake.demo.app import Faults
    from raglake.flows.evaluate import evaluate

    changed = tmp_path / "corpus"
    shutil.copytree(corpus, changed)
    note = changed / "work" / "projects" / "beacon.md"
    note.write_text(note.read_text() + "\n## Budget\n\nBeacon's 2025 budget was cut to 40k EUR in the autumn review.\n")
    demo = start_demo(changed, str(tmp_path / "demo-lake"), Faults(), [c.question for c in golden.cases])
    try:
        config = write_config(tmp_path / "demo.yaml", demo.port, timeout_s=10, retries=1, backoff_s=0.01)
        run_b = evaluate(
            RunSettings(
                golden=str(SAMPLE_GOLDEN), target=f"http:{config}", lake=str(flow_run.lake), metrics=FLOW_METRICS
            )
        )
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
