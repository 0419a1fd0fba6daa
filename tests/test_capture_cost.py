"""A capture's cost (issue 26): an optional `cost_usd` on a capture, read from a replay file, mapped from an
http target's response (`response: {cost_usd: "$.usage.cost"}`), carried by the columnar reader, landed in
`cases.cost_usd` (null in lakes written before the column), kept by `replay-run:` and by rescore's reading of
a stored run, and read by the `cost-below` assertion and a user metric's `case.cost_usd`; the run's
`target_cost_usd` adds it up. A capture without a cost keeps the canonical line and content hash it had
before the field existed (fixed values, taken at the commit before it), and so does an http config without
a cost mapping (its fingerprint, part of the staged captures' key)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import textwrap
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pydantic import TypeAdapter, ValidationError

from raglake.assertion_specs import AssertionSpec
from raglake.columnar.batch import ColumnarBatch
from raglake.columnar.captures import read_capture_columns
from raglake.errors import InputError
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.metrics import plugins
from raglake.metrics.assertion_checks import evaluate
from raglake.metrics.assertions import assertion_metric
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.custom import Case
from raglake.metrics.operational import RunInputs, target_cost_usd
from raglake.pipeline.scoring import score_columnar, score_context
from raglake.schemas import Capture, GoldenCase
from raglake.targets.http_client import MappingError, map_response
from raglake.targets.http_config import HttpTargetConfig, load_http_config
from raglake.targets.replay import ReplayFile
from tests.conftest import FIXTURES
from tests.httpkit import DEMO_CONFIG

MINI_GOLDEN = FIXTURES / "mini_golden.jsonl"
MINI_CAPTURES = FIXTURES / "mini_captures.jsonl"
# the canonical line of mini_captures' c1 and its sha256, as `model_dump_json()` wrote them before captures
# had a cost (commit bc3c59a)
C1_LINE = (
    '{"case_id":"c1","answer":"Atlas uses Postgres 16 [1].","abstained":false,"references":[{"rel_path":'
    '"work/atlas.md","heading_path":["Atlas","Database"]}],"retrieved":[{"rel_path":"work/other.md",'
    '"heading_path":["Other"],"rank":1,"text":"x","score":0.9,"chunk_id":null},{"rel_path":"work/atlas.md",'
    '"heading_path":["Atlas","Database","Version"],"rank":2,"text":"We run Postgres 16.","score":0.8,'
    '"chunk_id":null}],"method":"m1","status":"ok","error":null,"latency_ms":{"folder_selection":null,'
    '"retrieval":20.0,"generation":300.0,"total":330.0,"wall":null},"folder_mode":null,"selected_folders":[],'
    '"attempts":null}'
)
C1_SHA256 = "316940004b0afa86bc9a75fb9b93113c6e3a9ccb0ba26af64d9457c1c4064edc"
C2_SHA256 = "58f1e3dcee03f8bc621fe379c15b8ad2b7e88b935580c93a97b27a3690dc9206"
DEMO_FINGERPRINT = "a8dd271e8a4e9382"  # data/targets/demo.yaml's, before the mapping had cost_usd
COSTS = {"c1": 0.002, "c2": 0.05, "c4": 0.001}  # c3 reports none; c4's capture failed (its call still cost)
SPEC = TypeAdapter(AssertionSpec)


def _mini_captures() -> list[dict]:
    return [json.loads(line) for line in MINI_CAPTURES.read_text().splitlines()]


def costed_replay(path: Path) -> Path:
    """mini_captures with a cost on c1, c2 and c4."""
    rows = [{**c, **({"cost_usd": COSTS[c["case_id"]]} if c["case_id"] in COSTS else {})} for c in _mini_captures()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ---- the field: optional, validated, out of the canonical dump when absent --------------------------------


def test_a_capture_without_a_cost_keeps_its_canonical_line_and_hash() -> None:
    c1, c2 = (Capture.model_validate(c) for c in _mini_captures()[:2])
    assert c1.cost_usd is None and c1.model_dump_json() == C1_LINE
    assert hashlib.sha256(c1.model_dump_json().encode()).hexdigest() == C1_SHA256
    assert hashlib.sha256(c2.model_dump_json().encode()).hexdigest() == C2_SHA256
    assert "cost_usd" not in c1.model_dump(mode="json")  # what the capture journal writes
    costed = Capture.model_validate({**_mini_captures()[0], "cost_usd": 0.002})
    assert costed.model_dump_json() == C1_LINE[:-1] + ',"cost_usd":0.002}'
    assert Capture.model_validate_json(costed.model_dump_json()).cost_usd == 0.002
    assert Capture.model_validate({"case_id": "c", "answer": "a", "cost_usd": 0}).cost_usd == 0.0  # free is a cost


@pytest.mark.parametrize("value", [-0.01, "0.01", True, float("nan"), float("inf")])
def test_a_cost_must_be_a_finite_number_from_zero(value, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cost_usd"):
        Capture.model_validate({"case_id": "c", "answer": "a", "cost_usd": value})
    path = tmp_path / "captures.jsonl"  # the columnar reader refuses it too, naming file, line and field
    good = json.dumps({"case_id": "a", "answer": "x", "cost_usd": 0.5})
    bad = json.dumps({"case_id": "c", "answer": "x", "cost_usd": value})
    path.write_text(good + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_capture_columns(path)
    said = str(info.value)  # a NaN or Infinity is no JSON: refused as such, before any field is read
    assert ":2: " in said and ("cost_usd" in said or "is not allowed (JSON has no NaN or Infinity" in said)


def test_the_columnar_reader_carries_the_cost(tmp_path: Path) -> None:
    path = costed_replay(tmp_path / "captures.jsonl")
    for cols in (read_capture_columns(path), read_capture_columns(MINI_CAPTURES)):
        costs = cols.captures.column("cost_usd").to_pylist()
        expected = [COSTS.get(f"c{i}") for i in range(1, 5)] if cols.lines.path == str(path) else [None] * 4
        assert costs == expected
    spool = ReplayFile(str(path)).capture([GoldenCase(id=f"c{i}", question="q") for i in range(1, 5)])
    assert [c.cost_usd for c in spool] == [0.002, 0.05, None, 0.001]


# ---- read by cost-below and by a user metric --------------------------------------------------------------


def _capture(cost: float | None, **kw) -> Capture:
    return Capture.model_validate({"case_id": "c", "answer": "a", "cost_usd": cost, **kw})


def test_cost_below_passes_fails_and_is_undefined_without_a_cost() -> None:
    spec = SPEC.validate_python({"type": "cost-below", "usd": 0.01})
    got = [evaluate(spec, _capture(c)) for c in (0.002, 0.01, 0.05, None)]
    assert [(s.status, s.value, s.reason) for s in got[:3]] == [
        ("ok", 1.0, "cost $0.002 (below $0.01)"),
        ("ok", 0.0, "cost $0.01; cost-below $0.01"),  # strictly below passes
        ("ok", 0.0, "cost $0.05; cost-below $0.01"),
    ]
    assert (got[3].status, got[3].reason) == ("undefined", "cost-below: the target reports no cost")
    promptfoo = SPEC.validate_python({"type": "cost", "threshold": 0.01})  # promptfoo's name
    assert evaluate(promptfoo, _capture(0.002)).value == 1.0


def test_a_user_metric_reads_the_cost() -> None:
    golden = GoldenCase(id="c", question="q")
    assert Case(CaseContext(golden, _capture(0.0042), ScoringConfig())).cost_usd == 0.0042
    assert Case(CaseContext(golden, _capture(None), ScoringConfig())).cost_usd is None


def test_the_columnar_cost_below_gives_the_rows_of_the_function(tmp_path: Path) -> None:
    costs = [0.002, None, 0.05, 0.002, 0.0, None]
    pairs = [
        (
            GoldenCase(id=f"c{i}", question="q"),
            _capture(cost, case_id=f"c{i}", **({"status": "error", "error": "x"} if i == 5 else {})),
        )
        for i, cost in enumerate(costs)
    ]
    metric = assertion_metric("cheap", SPEC.validate_python({"type": "cost-below", "usd": 0.01}))
    cases, captures = tmp_path / "cases.jsonl", tmp_path / "captures.jsonl"
    cases.write_text("".join(c.model_dump_json() + "\n" for c, _ in pairs))
    captures.write_text("".join(x.model_dump_json() + "\n" for _, x in pairs))
    expected = [
        (case.id, s.status, s.reason, None if math.isnan(s.value) else s.value)
        for case, capture in pairs
        for _, s in score_context(CaseContext(case, capture, ScoringConfig()), [metric])
    ]
    assert [e[1:3] for e in expected] == [
        ("ok", "cost $0.002 (below $0.01)"),
        ("undefined", "cost-below: the target reports no cost"),
        ("ok", "cost $0.05; cost-below $0.01"),
        ("ok", "cost $0.002 (below $0.01)"),
        ("ok", "cost $0 (below $0.01)"),
        ("undefined", "capture_failed"),
    ]
    for batch in (ColumnarBatch.from_files(cases, captures, canonical=True), ColumnarBatch.from_models(pairs)):
        scored = score_columnar(batch, [metric], ScoringConfig()).scores
        values = [None if v != v else v for v in scored["value"]]
        assert list(zip(scored["case_id"], scored["status"], scored["reason"], values)) == expected


def test_the_run_figure_adds_up_the_costs_reported() -> None:
    captures = [_capture(0.002), _capture(None), _capture(0.05, status="error", error="x"), _capture(0.001)]
    [value] = target_cost_usd(RunInputs(captures))
    assert (value.metric, value.value, value.n, value.unit) == ("target_cost_usd", pytest.approx(0.053), 3, "usd")
    assert target_cost_usd(RunInputs([_capture(None)])) == []  # no capture reports one: no figure


def test_a_batch_scored_before_the_column_existed_is_scored_again(monkeypatch) -> None:
    """Its staged `cases` table lacks cost_usd: the scoring token (part of a scored batch's key) follows the
    staged tables' columns, so that batch is not found and landed short of a column."""
    from raglake.lake import tables
    from raglake.pipeline.plan import scoring_token

    now = scoring_token({"mrr_at_k": "2"}, ScoringConfig(), frozenset())
    cases = tables.TABLES["cases"]
    older = dataclasses.replace(cases, schema=cases.schema.remove(cases.schema.get_field_index("cost_usd")))
    monkeypatch.setitem(tables.TABLES, "cases", older)
    assert scoring_token({"mrr_at_k": "2"}, ScoringConfig(), frozenset()) != now


# ---- the http target's response mapping -------------------------------------------------------------------


def test_an_http_config_maps_the_cost_and_keeps_its_fingerprint_without_one() -> None:
    demo = load_http_config(DEMO_CONFIG)
    assert demo.response.cost_usd is None and demo.fingerprint() == DEMO_FINGERPRINT
    assert "cost_usd" not in demo.secret_free()["response"]
    data = demo.model_dump()
    data["response"] = {**data["response"], "cost_usd": "$.usage.cost"}
    costed = HttpTargetConfig.model_validate(data)
    assert costed.fingerprint() != DEMO_FINGERPRINT  # another mapping: captures made again
    assert map_response({"answer": "a", "usage": {"cost": 0.0031}}, costed, "c1")["cost_usd"] == 0.0031
    assert map_response({"answer": "a", "usage": {"cost": 2}}, costed, "c1")["cost_usd"] == 2
    assert map_response({"answer": "a"}, costed, "c1")["cost_usd"] is None
    assert "cost_usd" not in map_response({"answer": "a", "usage": {"cost": 1}}, demo, "c1")  # not mapped
    with pytest.raises(MappingError, match=r"cost_usd at '\$.usage.cost' is a str, expected int or float"):
        map_response({"answer": "a", "usage": {"cost": "0.1"}}, costed, "c1")


# ---- through the flow: a replay file and an http service, replay-run and rescore --------------------------

CHECKS = textwrap.dedent(
    """
    import raglake


    @raglake.metric("spend", scale="usd", higher_is_better=False, inputs=("cost",))
    def spend(case):
        return case.cost_usd
    """
).lstrip()


@pytest.fixture
def fresh_plugins(monkeypatch):
    monkeypatch.setattr(plugins, "_FILES", {})


def _scores(con, run_id: str) -> dict[tuple[str, str], tuple]:
    rows = fetch(
        con,
        "SELECT case_id, metric, status, reason, value FROM scores WHERE run_id = $r AND metric IN ('cheap', 'spend')",
        r=run_id,
    )
    return {(c, m): (s, r, None if v is None or math.isnan(v) else v) for c, m, s, r, v in rows}  # NaN unless ok


def _costs(con, run_id: str) -> list[tuple[str, float | None]]:
    return fetch(con, "SELECT case_id, cost_usd FROM cases WHERE run_id = $r ORDER BY 1", r=run_id)


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness", "fresh_plugins")
def test_a_replay_files_costs_are_scored_landed_and_kept_by_replay_run(tmp_path: Path) -> None:
    import raglake
    from raglake.pipeline.lakes import open_lake
    from raglake.pipeline.rescore import load_stored_run

    costed_replay(tmp_path / "captures.jsonl")
    (tmp_path / "checks.py").write_text(CHECKS, encoding="utf-8")
    (tmp_path / "raglake.yaml").write_text(
        textwrap.dedent(
            f"""
            golden: {MINI_GOLDEN}
            targets: ["replay:captures.jsonl"]
            lake: lake
            metrics: [cheap, spend]
            plugins: [checks.py]
            assertions:
              cheap: {{type: cost-below, usd: 0.01}}
            """
        ).lstrip()
    )
    first = raglake.evaluate(config=str(tmp_path / "raglake.yaml")).run_id
    con = connect(Lake(str(tmp_path / "lake")))
    expected = {
        ("c1", "cheap"): ("ok", "cost $0.002 (below $0.01)", 1.0),
        ("c2", "cheap"): ("ok", "cost $0.05; cost-below $0.01", 0.0),
        ("c3", "cheap"): ("undefined", "cost-below: the target reports no cost", None),
        ("c4", "cheap"): ("undefined", "capture_failed", None),
        ("c1", "spend"): ("ok", None, 0.002),
        ("c2", "spend"): ("ok", None, 0.05),
        ("c3", "spend"): ("undefined", "no cost", None),
        ("c4", "spend"): ("undefined", "capture_failed", None),
    }
    assert _scores(con, first) == expected
    landed = [("c1", 0.002), ("c2", 0.05), ("c3", None), ("c4", 0.001)]
    assert _costs(con, first) == landed
    figure = fetch(
        con, "SELECT value, n, unit FROM run_metrics WHERE run_id = $r AND metric = 'target_cost_usd'", r=first
    )
    assert figure == [(pytest.approx(0.053), 3, "usd")]
    # a run of the stored captures keeps their costs, and so does rescore's reading of the run
    again = raglake.evaluate(config=str(tmp_path / "raglake.yaml"), target=f"replay-run:{first}").run_id
    con = connect(Lake(str(tmp_path / "lake")))
    assert _scores(con, again) == expected and _costs(con, again) == landed
    stored = load_stored_run(open_lake(str(tmp_path / "lake")), first)
    assert [c.cost_usd for c in stored.captures] == [0.002, 0.05, None, 0.001]


class _CostlyService(BaseHTTPRequestHandler):
    """Answers each question with its cost under `usage.cost` (none for the bank password question)."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        question = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["question"]
        usage = {} if "password" in question else {"cost": len(question) / 1e4}
        body = {"answer": f"About: {question}", "usage": usage}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def costly_service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CostlyService)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ask"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_an_http_targets_mapped_cost_lands_and_a_replay_run_keeps_it(tmp_path: Path, costly_service: str) -> None:
    import raglake

    config = tmp_path / "costly.yaml"
    config.write_text(
        f"url: {costly_service}\nresponse:\n  answer: answer\n  cost_usd: $.usage.cost\nretries: 0\n", encoding="utf-8"
    )
    lake = str(tmp_path / "lake")
    metrics = ["recall_any_at_k"]
    live = raglake.evaluate(golden=str(MINI_GOLDEN), target=f"http:{config}", lake=lake, metrics=metrics).run_id
    questions = {json.loads(line)["id"]: json.loads(line)["question"] for line in MINI_GOLDEN.read_text().splitlines()}
    landed = [(cid, None if "password" in q else len(q) / 1e4) for cid, q in sorted(questions.items())]
    con = connect(Lake(lake))
    assert _costs(con, live) == landed
    replayed = raglake.evaluate(golden=str(MINI_GOLDEN), target=f"replay-run:{live}", lake=lake, metrics=metrics)
    assert _costs(connect(Lake(lake)), replayed.run_id) == landed


def test_a_lake_written_before_the_column_reads_it_as_null(tmp_path: Path) -> None:
    from raglake.targets.replay import ReplayRun
    from tests.lakekit import land

    lake = str(tmp_path / "lake")
    land(lake, str(MINI_GOLDEN), f"replay:{costed_replay(tmp_path / 'captures.jsonl')}", "r-old")
    [path] = list((tmp_path / "lake" / "cases").rglob("*.parquet"))
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["cost_usd"]), path)  # as a lake written before cost_usd
    con = connect(Lake(lake))
    assert _costs(con, "r-old") == [(f"c{i}", None) for i in range(1, 5)]
    assert [c.cost_usd for c in ReplayRun("r-old", Lake(lake)).capture([GoldenCase(id="c1", question="q")])] == [None]
