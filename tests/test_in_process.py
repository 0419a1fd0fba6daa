"""The in-process engine (RunSettings.orchestration, raglake.tasks.engine; issue 29's cold start): the
`evaluate` flow's body with its tasks as plain calls lands the very rows a Prefect flow run lands, makes
no flow run, keeps the tasks' retries; `auto` chooses it only for a small threaded run with no Prefect API
configured."""

from __future__ import annotations

import contextvars
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from raglake import prefect_server
from raglake.cli import app
from raglake.pipeline import lakes, orchestration
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from raglake.tasks import engine
from tests.conftest import FIXTURES
from tests.lakekit import assert_capped_and_closed, spy_on_open_lake

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
REPLAY = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
TABLES = {"scores": "scored_at", "cases": None, "chunks": None, "labels": None, "run_metrics": "value"}


def _rows(lake: Path, table: str, leave_out: str | None):
    files = f"{lake}/{table}/**/*.parquet"
    columns = f"* exclude ({leave_out})" if leave_out else "*"
    return duckdb.sql(f"select {columns} from read_parquet('{files}', hive_partitioning=false) order by all").df()


def _flow_runs(name: str) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName
    from prefect.client.schemas.sorting import FlowRunSort

    with get_client(sync_client=True) as client:
        found = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])), sort=FlowRunSort.ID_DESC, limit=10
        )
        return len(found)


@pytest.mark.usefixtures("prefect_harness")
def test_in_process_lands_the_rows_a_flow_run_lands_and_makes_no_flow_run(tmp_path: Path) -> None:
    from raglake.flows.evaluate import evaluate, evaluate_in_process

    settings = {
        "golden": GOLDEN,
        "target": REPLAY,
        "metrics": ["mrr_at_k", "recall_any_at_k", "abstention_accuracy", "semantic_similarity"],
    }
    here, there = tmp_path / "in-process", tmp_path / "prefect"
    assert evaluate_in_process(RunSettings(**settings, lake=str(here), run_id="r-same")) == "r-same"
    runs_before = _flow_runs("r-same")
    assert evaluate(RunSettings(**settings, lake=str(there), run_id="r-same")) == "r-same"
    for table, leave_out in TABLES.items():  # run_metrics' values are timings; the rest is equal
        mine, theirs = _rows(here, table, leave_out), _rows(there, table, leave_out)
        assert len(mine) and mine.equals(theirs), table
    assert runs_before == 0 and _flow_runs("r-same") == 1  # the flow run is the Prefect one's


def test_the_command_line_runs_in_process_and_refuses_it_with_dask(tmp_path: Path, monkeypatch) -> None:
    lake = str(tmp_path / "lake")
    args = ["run", "--golden", GOLDEN, "--target", REPLAY, "--lake", lake, "--metrics", "mrr_at_k"]
    opened = spy_on_open_lake(monkeypatch, lakes)
    done = CliRunner().invoke(app, [*args, "--orchestration", "in-process", "--run-id", "r-cli-local"])
    assert done.exit_code == 0, done.output
    assert "r-cli-local" in done.output and len(_rows(Path(lake), "scores", "scored_at"))
    assert_capped_and_closed(opened)  # the summaries printed after the run: DuckDB capped, its connection closed
    refused = CliRunner().invoke(app, [*args, "--orchestration", "in-process", "--runner", "dask"])
    assert refused.exit_code != 0
    message = " ".join(str(refused.exception or refused.output).split())
    assert "orchestration in-process scores on threads" in message and "dask" in message


def test_auto_runs_a_small_threaded_run_in_process_only_without_an_api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_run(RunSettings(golden=GOLDEN, target=REPLAY, lake=str(tmp_path / "lake")))
    monkeypatch.setattr(prefect_server, "no_api_configured", lambda: True)
    assert orchestration.runs_in_process(plan) and not orchestration.needs_prefect([plan])
    dask = plan_run(RunSettings(golden=GOLDEN, target=REPLAY, lake=str(tmp_path / "lake"), runner="dask"))
    assert not orchestration.runs_in_process(dask)
    monkeypatch.setattr(orchestration, "IN_PROCESS_MAX_CASES", len(plan.golden.cases) - 1)
    assert not orchestration.runs_in_process(plan)  # a larger run keeps its flow run
    monkeypatch.setattr(orchestration, "IN_PROCESS_MAX_CASES", len(plan.golden.cases))
    monkeypatch.setattr(prefect_server, "no_api_configured", lambda: False)
    assert not orchestration.runs_in_process(plan) and orchestration.needs_prefect([plan])
    chosen = {
        o: orchestration.runs_in_process(
            plan_run(plan.settings.model_copy(update={"orchestration": o, "run_id": None}))
        )
        for o in ("prefect", "in-process")
    }
    assert chosen == {"prefect": False, "in-process": True}


def _task(fn, retries: int = 0, delays: object = 0) -> engine.Task:
    return engine.task(name="t", retries=retries, retry_delay_seconds=delays)(fn)


def test_in_process_tasks_keep_their_retries_and_say_the_last_error() -> None:
    tries: list[int] = []

    def flaky(n: int) -> int:
        tries.append(n)
        if len(tries) < 3:
            raise OSError(f"try {len(tries)} failed")
        return n * 2

    with engine.in_process(2):
        assert engine.call(_task(flaky, retries=2, delays=[0, 0]), 21) == 42
        assert tries == [21, 21, 21]
        tries.clear()
        with pytest.raises(OSError, match="try 2 failed"):
            engine.call(_task(flaky, retries=1, delays=0), 5)
        assert tries == [5, 5]


def test_in_process_map_keeps_the_order_passes_quoted_values_and_sees_the_callers_context() -> None:
    marker = contextvars.ContextVar("marker", default="unset")
    marker.set("caller's")

    def work(batch: int, scale: int, label: str) -> tuple[int, str, str]:
        return batch * scale, label, marker.get()

    with engine.in_process(3):
        assert engine.running_in_process()
        got = engine.map(_task(work), "batch", [3, 1, 2], scale=engine.quote(10), label="x")
    assert got == [(30, "x", "caller's"), (10, "x", "caller's"), (20, "x", "caller's")]
    assert not engine.running_in_process()


def test_a_fresh_process_without_an_api_starts_no_prefect_server_unless_asked(tmp_path: Path) -> None:
    """End to end, as a newcomer's `raglake run`: `auto` touches no Prefect database (no server ran), the same
    command with `--orchestration prefect` makes its flow run in one."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    for orchestrated, home in (("auto", tmp_path / "home-auto"), ("prefect", tmp_path / "home-prefect")):
        args = ["run", "--golden", GOLDEN, "--target", REPLAY, "--lake", str(tmp_path / f"lake-{orchestrated}")]
        done = subprocess.run(
            [sys.executable, "-m", "raglake", *args, "--orchestration", orchestrated, "--metrics", "mrr_at_k"],
            cwd=tmp_path,
            env={**env, "PREFECT_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert (home / "prefect.db").exists() == (orchestrated == "prefect"), orchestrated


def test_a_failed_task_cancels_the_queued_ones() -> None:
    """As Prefect's task runner does when the flow body raises: what has not started does not run."""
    import time

    ran: list[int] = []

    def work(batch: int) -> int:
        if batch == 0:
            time.sleep(0.1)
            raise ValueError("batch 0 failed")
        time.sleep(0.3)
        ran.append(batch)
        return batch

    with pytest.raises(ValueError, match="batch 0 failed"), engine.in_process(1):
        engine.map(_task(work), "batch", [0, 1, 2, 3])
    assert 2 not in ran and 3 not in ran  # batch 1 may have started as batch 0 ended


NO_PREFECT = """
import json, sys
import raglake
from raglake.cli import main
kind, orchestration, lake, golden, target = sys.argv[1:]
if kind == "api":
    raglake.evaluate(golden=golden, target=target, metrics=["mrr_at_k"], lake=lake, orchestration=orchestration)
else:
    sys.argv = ["raglake", "run", "--golden", golden, "--target", target, "--lake", lake, "--metrics", "mrr_at_k",
                "--orchestration", orchestration]
    try:
        main()
    except SystemExit as e:
        assert not e.code, e.code
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("prefect", "prefect_dask"))))
"""


@pytest.mark.parametrize("kind", ["api", "cli"])
def test_a_run_in_this_process_never_imports_prefect(tmp_path: Path, kind: str) -> None:
    """Issue 29's cold start: the engine, the tasks and the flow body are Prefect-free, so a run `auto` keeps
    in this process pays nothing for Prefect (~1.1 s to import, ~0.2 s at exit); the same run on Prefect
    imports it (so the check can fail)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}

    def prefect_modules(orchestration: str) -> list[str]:
        lake = str(tmp_path / f"lake-{orchestration}")
        done = subprocess.run(
            [sys.executable, "-c", NO_PREFECT, kind, orchestration, lake, GOLDEN, REPLAY],
            cwd=tmp_path,
            env={**env, "PREFECT_HOME": str(tmp_path / "home")},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert prefect_modules("auto") == []
    if kind == "cli":  # the server path, once
        assert "prefect" in prefect_modules("prefect")
