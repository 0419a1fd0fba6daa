"""Every flow run is named by the raglake run id it works on (what `raglake runs` lists), not by
Prefect's random pair of words: an `evaluate` run whose settings fix the id, one whose plan makes it
(a deployment's), and a `rescore` run (the runs it re-scores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]
GOLDEN = str(FIXTURES / "mini_golden.jsonl")
REPLAY = f"replay:{FIXTURES / 'mini_captures.jsonl'}"


def _flow_names(run_names: list[str]) -> dict[str, str]:
    """{flow run name: its flow's name} of the flow runs with these names."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=run_names)), sort=FlowRunSort.ID_DESC, limit=200
        )
        return {r.name: client.read_flow(r.flow_id).name for r in runs}


def test_evaluate_and_rescore_runs_are_named_by_the_run_id(tmp_path: Path) -> None:
    from raglake.flows.evaluate import evaluate
    from raglake.flows.rescore import rescore

    lake = str(tmp_path / "lake")
    fixed = evaluate(RunSettings(golden=GOLDEN, target=REPLAY, lake=lake, run_id="r-named-run", metrics=["mrr_at_k"]))
    planned = evaluate(RunSettings(golden=GOLDEN, target=REPLAY, lake=lake, metrics=["mrr_at_k"]))
    assert fixed == "r-named-run" and planned.startswith("r-") and planned != fixed
    assert _flow_names([fixed, planned]) == {fixed: "evaluate", planned: "evaluate"}  # the second renamed itself
    rescore(RescoreSettings(run_ids=[fixed, planned], metrics=["mrr_at_k"], lake=lake, force=True))
    name = f"rescore {fixed} {planned}"
    assert _flow_names([name]) == {name: "rescore"}

def test_rescore_names_list_three_runs_and_count_the_rest() -> None:
    from raglake.flows.names import rescore_run_name

    assert rescore_run_name(["a", "b", "c", "d", "e"]) == "rescore a b c and 2 more"
    assert rescore_run_name([]) == "rescore"
