"""`--runner dask:tcp://…` on a cluster of separate processes: `dask scheduler` and two `dask worker`
processes (the CLIs of the `distributed` package, on loopback ports), the results location in a bucket of
moto's S3 server. The workers share nothing with the flow but the bucket, the embedding cache and the
Prefect API: the rows equal the thread runner's, and with one worker killed (SIGKILL) mid-run Dask runs
its batches again on the other and the run completes with the same rows."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.pipeline.settings import RunSettings
from tests.conftest import ROOT
from tests.s3kit import FaultProxy, MotoServer, free_port, make_bucket, s3_env, stop, use_endpoint, wait_for_port

pytestmark = [pytest.mark.cluster, pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

GOLDEN, TARGET = "data/golden/sample.jsonl", "replay:data/captures/local_search.jsonl"
# deterministic and embedding metrics: the workers read the vectors the flow's embedding stage cached
METRICS = ["recall_any_at_k", "mrr_at_k", "ndcg_at_k", "abstention_accuracy", "context_relevance",
           "answer_correctness_emb", "answer_hallucination"]  # fmt: skip
DASK = str(Path(sys.executable).with_name("dask"))


@dataclass
class Cluster:
    address: str
    workers: list[subprocess.Popen]
    worker_address: dict[int, str]  # pid -> the worker's address at the scheduler
    moto: MotoServer
    proxy: FaultProxy


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A scheduler and two single-threaded workers (no nanny: a killed worker stays dead), each its own
    process, started as a user starts them; all of them stopped at the end."""
    from prefect.settings import get_current_settings

    folder = tmp_path_factory.mktemp("dask")
    with MotoServer() as moto, FaultProxy(moto.url) as proxy:
        env = s3_env(proxy.url)
        env.update(PREFECT_API_URL=str(get_current_settings().api.url), TMPDIR=str(folder))
        env["DASK_TEMPORARY_DIRECTORY"] = str(folder)  # the scheduler's scratch space, not /tmp
        port = free_port()
        address = f"tcp://127.0.0.1:{port}"
        common = {"cwd": ROOT, "env": env, "start_new_session": True}
        log = open(folder / "cluster.log", "wb")  # noqa: SIM115 (closed below)
        procs = [
            subprocess.Popen(
                [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                stdout=log,
                stderr=subprocess.STDOUT,
                **common,
            )  # fmt: skip
        ]
        try:
            wait_for_port(port, procs[0])
            for i in range(2):
                procs.append(
                    subprocess.Popen(
                        [
                            DASK,
                            "worker",
                            address,
                            "--host",
                            "127.0.0.1",
                            "--nthreads",
                            "1",
                            "--no-nanny",
                            "--no-dashboard",
                            "--name",
                            f"w{i}",
                            "--local-directory",
                            str(folder / f"w{i}"),
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        **common,
                    )  # fmt: skip
                )
            yield Cluster(address, procs[1:], _wait_for_workers(address, 2), moto, proxy)
        finally:
            for proc in reversed(procs):
                stop(proc)
            log.close()


def _wait_for_workers(address: str, n: int) -> dict[int, str]:
    """Once `n` workers are up: each one's pid -> its address."""
    from distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(n, timeout=60)
        return {pid: worker for worker, pid in client.run(os.getpid).items()}


def _processing(address: str, worker: str) -> int:
    """How many tasks the scheduler has given `worker` that it has not finished."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        return len(client.processing().get(worker, ()))


def _scores(lake: str) -> dict[tuple[str, str], tuple]:
    rows = connect(Lake(lake)).sql("SELECT case_id, metric, value, status, reason, metric_version FROM scores")
    return {
        (c, m): ("nan" if v is not None and math.isnan(v) else v, s, r, ver) for c, m, v, s, r, ver in rows.fetchall()
    }


def _same(dask: dict, thread: dict) -> None:
    assert dask.keys() == thread.keys() and len(thread) == 66 * len(METRICS)
    for key, (value, *rest) in thread.items():
        other, *other_rest = dask[key]
        assert other_rest == rest, key
        # float32 sums of embedding products may differ in the last bit on a worker (one BLAS thread)
        assert other == value or (isinstance(value, float) and other == pytest.approx(value, rel=1e-6, abs=1e-7)), key


def _evaluate(lake: str, results: str, runner: str) -> str:
    from raglake.flows.evaluate import evaluate

    settings = RunSettings(golden=GOLDEN, target=TARGET, lake=lake, metrics=METRICS, batch_size=6,
                           results=results, runner=runner)  # fmt: skip
    return evaluate(settings)


@pytest.fixture(scope="module")
def thread_rows(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> dict:
    folder = tmp_path_factory.mktemp("thread")
    _evaluate(str(folder / "lake"), str(folder / "results"), "thread")
    return _scores(str(folder / "lake"))


def _bucket(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"d-{uuid.uuid4().hex[:10]}"
    make_bucket(cluster.moto.url, name)
    use_endpoint(monkeypatch, cluster.proxy.url)
    return name


def test_a_cluster_of_processes_lands_the_thread_runners_rows(
    cluster: Cluster, thread_rows: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = _bucket(cluster, monkeypatch)
    cluster.proxy.reset()
    lake = str(tmp_path / "lake")
    from typer.testing import CliRunner

    from raglake.cli import app

    args = ["run", "--golden", GOLDEN, "--target", TARGET, "--lake", lake, "--results", f"s3://{bucket}/results",
            "--runner", f"dask:{cluster.address}", "-m", ",".join(METRICS), "--batch-size", "6", "-q"]  # fmt: skip
    result = CliRunner().invoke(app, args)  # the README's command, in this process
    assert result.exit_code == 0, result.output
    _same(_scores(lake), thread_rows)
    assert cluster.proxy.requests["PutObject"] > 0  # the workers staged their tables in the bucket


def test_a_worker_killed_mid_run_is_retried_by_dask_and_the_rows_are_the_same(
    cluster: Cluster, thread_rows: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = _bucket(cluster, monkeypatch)
    victim = cluster.workers[0]
    killed, held = threading.Event(), []

    def kill_at_the_first_scored_batch(method: str, path: str, query: str) -> bool:
        if method == "PUT" and "/results/scored/" in path and not killed.is_set():
            killed.set()
            held.append(_processing(cluster.address, cluster.worker_address[victim.pid]))
            os.kill(victim.pid, signal.SIGKILL)
        return False

    cluster.proxy.hook = kill_at_the_first_scored_batch
    try:
        lake = f"s3://{bucket}/lake"
        _evaluate(lake, f"s3://{bucket}/results", f"dask:{cluster.address}")
    finally:
        cluster.proxy.hook = None
    assert killed.is_set() and victim.wait(10) == -signal.SIGKILL
    assert held[0] >= 1  # the killed worker held batches: Dask ran them again on the other
    use_endpoint(monkeypatch, cluster.moto.url)
    _same(_scores(lake), thread_rows)
