"""raglake's deployments on a real Prefect server, as a team runs them: `prefect server start` (loopback, a
free port, a temporary PREFECT_HOME), a process work pool, `prefect deploy -n NAME --prefect-file
deployments/prefect.yaml` for each deployment (RAGLAKE_HOME: this checkout; `--all` stops after the first
under Prefect 3.8.8, see Server.deploy), `prefect worker start`, then the nightly
deployment (the eval file, its lake overridden into tmp_path) and a backfill (the `rescore` deployment with
parameters) triggered with `prefect deployment run`; the flow runs' states, names and artifacts are read
back through the server's REST API. Each evaluation subflow run is named by its raglake run id."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from raglake.lake.query import connect
from raglake.lake.store import Lake
from tests.conftest import ROOT
from tests.s3kit import free_port, stop, wait_for_port

pytestmark = [pytest.mark.cluster, pytest.mark.e2e]

PREFECT = str(Path(sys.executable).with_name("prefect"))
POOL = "raglake-process"
METRICS = ["recall_any_at_k", "mrr_at_k", "abstention_accuracy"]  # quick: no embedder, no judge
DEPLOYMENTS = ("nightly", "nightly-settings", "rescore")
# Prefect 3.8.8's `prefect deploy`, once a deployment is created, asks the server for the pool's online
# workers with `"limit": null`, which the server refuses under FastAPI 0.154 (422 on workers/filter): the
# command exits 1 after creating the first deployment (with --all, the rest are never created)
_WORKERS_FILTER_422 = re.compile(r"422 Unprocessable Entity' for url '\S+/work_pools/[^/]+/workers/filter'")


@dataclass
class Server:
    api: str
    env: dict[str, str]

    def prefect(self, *args: str, timeout: float = 180) -> str:
        """`prefect ARGS` against this server from the repository root; its output (it must succeed)."""
        done = subprocess.run(
            [PREFECT, "--no-prompt", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        assert done.returncode == 0, f"prefect {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    def deploy(self, name: str) -> None:
        """`prefect deploy -n NAME --prefect-file deployments/prefect.yaml`: the deployment is created (the
        server then has it), whether or not the command trips on the workers/filter call after it."""
        done = subprocess.run(
            [PREFECT, "--no-prompt", "deploy", "-n", name, "--prefect-file", "deployments/prefect.yaml"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        out = done.stdout + done.stderr
        assert "successfully created" in out and (done.returncode == 0 or _WORKERS_FILTER_422.search(out)), out

    def get(self, path: str) -> dict:
        return httpx.get(f"{self.api}{path}", timeout=30).raise_for_status().json()

    def post(self, path: str, body: dict) -> list[dict]:
        return httpx.post(f"{self.api}{path}", json=body, timeout=30).raise_for_status().json()

    def finished(self, flow_run_id: str, timeout: float = 420) -> dict:
        """The flow run once its state is final (a failure says so with the worker's log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.get(f"/flow_runs/{flow_run_id}")
            if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                return run
            time.sleep(1)
        raise AssertionError(f"flow run {flow_run_id} did not finish within {timeout} s")

    def subflow_runs(self, parent_id: str) -> list[dict]:
        return self.post("/flow_runs/filter", {"flow_runs": {"parent_flow_run_id": {"any_": [parent_id]}}})

    def artifacts(self, flow_run_ids: list[str]) -> list[dict]:
        return self.post("/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": flow_run_ids}}})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A Prefect server and a process worker on its work pool, the deployments registered; stopped after."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",  # the worker polls its pool every second (10 by default)
        "RAGLAKE_HOME": str(ROOT),  # where the deployments' pull step puts the worker's flow runs
        "TMPDIR": str(home),
    }
    env.pop("PREFECT_RESULTS_LOCAL_STORAGE_PATH", None)  # the session harness's: the server's home holds them
    log = open(home / "server.log", "wb")  # noqa: SIM115 (closed below)
    procs = [
        subprocess.Popen(
            [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port), "--no-ui"],
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    ]
    try:
        wait_for_port(port, procs[0], timeout=120)
        _healthy(api, procs[0])
        s = Server(api, env)
        s.prefect("work-pool", "create", POOL, "--type", "process")
        for name in DEPLOYMENTS:
            s.deploy(name)
        worker_log = open(home / "worker.log", "wb")  # noqa: SIM115 (closed below)
        procs.append(
            subprocess.Popen(
                [PREFECT, "worker", "start", "--pool", POOL],
                cwd=ROOT,
                env=env,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        )
        yield s
    finally:
        for proc in reversed(procs):
            stop(proc, timeout=30)
        log.close()


def _healthy(api: str, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{api}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("the Prefect server did not become healthy")


def _flow_run_id(output: str) -> str:
    """The flow run's id in `prefect deployment run`'s output."""
    found = re.search(r"UUID:\s*([0-9a-f-]{36})", output)
    assert found, output
    return found.group(1)


def test_the_deployments_are_registered_on_the_work_pool(server: Server) -> None:
    for flow, name in (("evaluation", "nightly"), ("evaluate", "nightly-settings"), ("rescore", "rescore")):
        deployment = server.get(f"/deployments/name/{flow}/{name}")
        assert deployment["work_pool_name"] == POOL, deployment
    nightly = server.get("/deployments/name/evaluation/nightly")
    assert nightly["parameters"]["config"] == "data/raglake.yaml"
    assert [s["schedule"]["cron"] for s in nightly["schedules"]] == ["0 2 * * *"]


def test_the_nightly_run_and_a_backfill_through_a_worker(server: Server, tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    overrides = {"lake": lake, "metrics": METRICS}
    out = server.prefect("deployment", "run", "evaluation/nightly", "--param", f"overrides={json.dumps(overrides)}")
    nightly = server.finished(_flow_run_id(out))
    assert nightly["state"]["type"] == "COMPLETED", nightly["state"]
    assert nightly["name"] == "evaluation data/raglake.yaml"
    subflows = server.subflow_runs(nightly["id"])
    run_ids = sorted(r[0] for r in connect(Lake(lake)).sql("SELECT run_id FROM runs").fetchall())
    assert len(run_ids) == 2  # the eval file's two targets
    assert sorted(r["name"] for r in subflows) == run_ids  # each evaluate subflow run is named by its run id
    assert {r["state"]["type"] for r in subflows} == {"COMPLETED"}
    artifacts = server.artifacts([r["id"] for r in subflows])
    described = sorted(a["description"] for a in artifacts)
    assert [d for d in described if d.startswith("raglake run ")] == [f"raglake run {r}" for r in run_ids]
    assert sum(a["type"] == "table" for a in artifacts) == 2

    settings = {"run_ids": run_ids[:1], "lake": lake, "metrics": [*METRICS, "ndcg_at_k"]}
    out = server.prefect("deployment", "run", "rescore/rescore", "--param", f"settings={json.dumps(settings)}")
    backfill = server.finished(_flow_run_id(out))
    assert backfill["state"]["type"] == "COMPLETED", backfill["state"]
    assert backfill["name"] == f"rescore {run_ids[0]}"
    rescored = connect(Lake(lake)).sql("SELECT run_id, count(*) FROM scores WHERE metric = 'ndcg_at_k' GROUP BY ALL")
    assert rescored.fetchall() == [(run_ids[0], 66)]
