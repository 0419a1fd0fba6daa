"""The evaluate flow publishes the run as Prefect artifacts: a markdown summary (against the previous
run of the same target) and a table of headline metrics with n and 95% CIs."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]


def of_run(key: str, run_id: str) -> dict:
    """The artifact under `key` published for `run_id` (other tests publish under the same key).
    Prefect 3.8.8's client sends null for unset filter fields, which its own server refuses (422), so
    the filter goes out as the server wants it."""
    from prefect.client.orchestration import get_client

    async def read() -> list[dict]:
        async with get_client() as client:
            response = await client._client.post(
                "/artifacts/filter",
                json={
                    "artifacts": {"key": {"any_": [key]}},
                    "flow_runs": {},
                    "task_runs": {},
                    "limit": 200,
                    "offset": 0,
                    "sort": "CREATED_DESC",
                },
            )
            response.raise_for_status()
            return response.json()

    deadline = time.monotonic() + 60  # artifacts reach the server shortly after the flow returns
    while (
        not (found := [a for a in asyncio.run(read()) if run_id in (a.get("description") or "")])
        and time.monotonic() < deadline
    ):
        time.sleep(0.5)
    assert len(found) == 1, f"{len(found)} artifact(s) {key!r} for run {run_id}"
    return found[0]


def test_the_flow_publishes_a_summary_and_a_headline_table(tmp_path, monkeypatch):
    from raglake.flows.evaluate import evaluate
    from raglake.pipeline import lakes
    from raglake.pipeline.settings import RunSettings
    from tests.lakekit import assert_capped_and_closed, spy_on_open_lake

    lake = str(tmp_path / "lake")
    opened = spy_on_open_lake(monkeypatch, lakes)
    for _ in range(2):  # the second run is summarised against the first
        run_id = evaluate(
            RunSettings(
                golden="data/golden/sample.jsonl",
                target="replay:data/captures/basic_search.jsonl",
                lake=lake,
                metrics=["recall_any_at_k", "mrr_at_k", "abstention_accuracy"],
            )
        )
    assert_capped_and_closed(opened)  # publish_summary's DuckDB: capped, as the flow's process holds the run
    md, table = of_run("raglake-summary-basic-search", run_id), of_run("raglake-headline-basic-search", run_id)
    assert run_id in md["data"] and "recall_any_at_k" in md["data"] and "Against" in md["data"]
    rows = json.loads(table["data"]) if isinstance(table["data"], str) else table["data"]
    by = {r["metric"]: r for r in rows}
    assert (
        by["recall_any_at_k"]["n"] > 0
        and by["recall_any_at_k"]["ci_low"] <= by["recall_any_at_k"]["mean"] <= by["recall_any_at_k"]["ci_high"]
    )
