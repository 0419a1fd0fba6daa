"""Nested fields as Parquet maps, structs and lists (issue 13, item 4): a plain reader (pyarrow, DuckDB's
read_parquet) queries them without JSON functions, and a lake holding an older run (the same fields as
JSON strings under their old names) next to a new one stays readable by raglake and by a plain reader."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from raglake.lake.calls import LakeCallStore
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.registry import get_metric
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.rescore import load_stored_run
from tests.conftest import ROOT
from tests.lakekit import land

FIXTURES = ROOT / "tests" / "fixtures"
GOLDEN, CAPTURES = FIXTURES / "mini_golden.jsonl", FIXTURES / "mini_captures.jsonl"
TARGET = f"replay:{CAPTURES}"


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _expected_supports() -> dict[str, list[tuple]]:
    """(rel_path, heading_path, snippets, date, required) of every gold support, from the golden file itself."""
    return {
        case["id"]: [
            (
                s["rel_path"],
                s["heading_path"],
                s.get("snippets", []),
                dt.date.fromisoformat(s["date"]) if s.get("date") else None,
                s.get("required", False),
            )
            for s in case.get("gold_supports", [])
        ]
        for case in _lines(GOLDEN)
    }


@pytest.fixture
def lake_dir(tmp_path: Path) -> str:
    lake = str(tmp_path / "lake")
    land(lake, str(GOLDEN), TARGET, "r-new")
    return lake


def test_a_plain_reader_queries_the_nested_fields_without_json(lake_dir: str) -> None:
    mrr = get_metric("mrr_at_k").version
    # pyarrow: typed columns, values as Python objects
    runs = pq.read_table(f"{lake_dir}/runs")
    assert pa.types.is_map(runs.schema.field("metric_version_map").type)
    assert dict(runs.column("metric_version_map")[0].as_py())["mrr_at_k"] == mrr
    cases = ds.dataset(f"{lake_dir}/cases", format="parquet", partitioning="hive").to_table(
        columns=["case_id", "gold_support_list", "reference_list"]
    )
    got = {
        row["case_id"]: [(s["rel_path"], s["heading_path"], s["snippets"], s["date"], s["required"]) for s in supports]
        for row in cases.to_pylist()
        for supports in [row["gold_support_list"]]
    }
    assert got == _expected_supports() and got["c1"][0][3] == dt.date(2025, 3, 1)
    # DuckDB's read_parquet: map access and unnest, no JSON function anywhere
    runs_glob, cases_glob = f"'{lake_dir}/runs/*/*.parquet'", f"'{lake_dir}/cases/*/*.parquet'"
    assert duckdb.sql(
        f"SELECT run_id, metric_version_map['mrr_at_k'], typeof(prompt_version_map) "
        f"FROM read_parquet({runs_glob}, hive_partitioning = true)"
    ).fetchall() == [("r-new", mrr, "MAP(VARCHAR, INTEGER)")]
    supports = duckdb.sql(
        f"SELECT case_id, s.rel_path, s.heading_path FROM read_parquet({cases_glob}, hive_partitioning = true), "
        "unnest(gold_support_list) AS u(s) WHERE run_id = 'r-new' ORDER BY case_id, s.rel_path, s.heading_path"
    ).fetchall()
    assert supports == sorted((cid, s[0], s[1]) for cid, ss in _expected_supports().items() for s in ss)
    cited = duckdb.sql(
        f"SELECT case_id, r.rel_path, r.heading_path FROM read_parquet({cases_glob}, hive_partitioning = true), "
        "unnest(reference_list) AS u(r) ORDER BY ALL"
    ).fetchall()
    expected = sorted(
        (c["case_id"], r["rel_path"], r["heading_path"]) for c in _lines(CAPTURES) for r in c.get("references", [])
    )
    assert cited == expected != []


def _to_old_layout(lake_dir: str, run_id: str) -> None:
    """Rewrite a run's runs and cases files as an older raglake wrote them: the nested fields as JSON
    strings under their old names, `target` for target_spec and no target_name."""
    [runs_file] = [f for f in Path(lake_dir, "runs").rglob("*.parquet") if f.stem == run_id]
    runs = pq.read_table(runs_file)
    versions = {
        old: json.dumps(dict(runs.column(new)[0].as_py()), sort_keys=True)
        for old, new in (("metric_versions", "metric_version_map"), ("prompt_versions", "prompt_version_map"))
    }
    runs = runs.drop_columns(["metric_version_map", "prompt_version_map", "target_name", "committed", "committed_at"])
    runs = runs.rename_columns(["target" if n == "target_spec" else n for n in runs.column_names])
    for old, text in versions.items():
        runs = runs.append_column(old, pa.array([text]))
    pq.write_table(runs, runs_file)
    for f in Path(lake_dir, "cases", f"run_id={run_id}").glob("*.parquet"):
        cases = pq.read_table(f)
        golden = [json.loads(g) for g in cases.column("golden_case").to_pylist()]
        refs = [
            [{"rel_path": r["rel_path"], "heading_path": r["heading_path"].split(" > ")} for r in row]
            for row in cases.column("reference_list").to_pylist()
        ]
        cases = cases.drop_columns(["gold_support_list", "reference_list"])
        cases = cases.append_column("gold_supports", pa.array([json.dumps(g["gold_supports"]) for g in golden]))
        cases = cases.append_column("references", pa.array([json.dumps(r) for r in refs]))
        pq.write_table(cases, f)


def test_an_old_layout_run_next_to_a_new_one_reads_as_the_current_layout(lake_dir: str) -> None:
    land(lake_dir, str(GOLDEN), TARGET, "r-old", minutes=-60)
    _to_old_layout(lake_dir, "r-old")
    assert pa.types.is_string(
        pq.read_schema(next(Path(lake_dir, "cases", "run_id=r-old").glob("*.parquet"))).field("gold_supports").type
    )
    q = open_lake(lake_dir)
    runs = {
        r[0]: r[1:]
        for r in fetch(
            q.con, "SELECT run_id, metric_version_map, prompt_version_map, target_name, target_spec FROM runs"
        )
    }
    assert runs["r-old"][:2] == runs["r-new"][:2] and runs["r-old"][0]["mrr_at_k"] == get_metric("mrr_at_k").version
    assert runs["r-old"][2] == runs["r-old"][3] == TARGET  # no target_name in the old file: its target_spec
    assert [r["target_name"] for r in q.runs(10)] == [runs["r-new"][2], TARGET]
    nested = "SELECT case_id, gold_support_list, reference_list FROM cases WHERE run_id = $r ORDER BY case_id"
    old, new = fetch(q.con, nested, r="r-old"), fetch(q.con, nested, r="r-new")
    assert old == new and old[0][1][0]["date"] == dt.date(2025, 3, 1) and old[0][2]
    assert fetch(q.con, "SELECT DISTINCT typeof(gold_support_list) FROM cases") == [
        ("STRUCT(rel_path VARCHAR, heading_path VARCHAR, snippets VARCHAR[], date DATE, required BOOLEAN)[]",)
    ]
    # re-scoring re-reads cases and captures from the lake: the old run gives what the new one gives
    stored_old, stored_new = load_stored_run(q, "r-old"), load_stored_run(q, "r-new")
    assert stored_old.captures == stored_new.captures and stored_old.cases == stored_new.cases
    # a plain reader of the mixed lake: the typed column is null in the old file, the JSON one in the new
    plain = duckdb.sql(
        f"SELECT run_id, metric_version_map['mrr_at_k'], metric_versions IS NOT NULL "
        f"FROM read_parquet('{lake_dir}/runs/*/*.parquet', hive_partitioning = true, union_by_name = true) "
        "ORDER BY run_id"
    ).fetchall()
    assert plain == [("r-new", get_metric("mrr_at_k").version, False), ("r-old", None, True)]


def test_judge_calls_sampling_params_are_a_struct_and_old_json_params_read_as_one(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    base = {"model": "m", "prompt_id": "p", "prompt_version": 1, "status": "ok", "response": "{}", "created_at": now}
    LakeCallStore(lake).append(
        [{**base, "call_key": "new", "sampling_params": {"temperature": 0, "seed": 7, "max_tokens": 64}}]
    )
    spec = TABLES["judge_calls"]
    old = to_arrow(spec, {**{k: [v] for k, v in base.items()}, "call_key": ["old"]}, optional=spec.schema.names)
    old = old.drop_columns(["sampling_params"]).append_column(
        "params", pa.array([json.dumps({"max_tokens": 32, "seed": 3, "temperature": 0})])
    )
    lake.fs.makedirs(f"{lake.root}/judge_calls/call_date=2025-12-31", exist_ok=True)
    pq.write_table(old, f"{lake.root}/judge_calls/call_date=2025-12-31/calls-old.parquet")
    assert fetch(
        connect(lake), "SELECT call_key, sampling_params.seed, sampling_params.max_tokens FROM judge_calls ORDER BY ALL"
    ) == [("new", 7, 64), ("old", 3, 32)]
    assert {key for key, _, _ in LakeCallStore(lake).read(["ok"])} == {"new", "old"}
    plain = duckdb.sql(
        f"SELECT sampling_params.temperature FROM read_parquet('{lake.root}/judge_calls/*/calls-[!o]*.parquet')"
    ).fetchall()
    assert plain == [(0.0,)]
