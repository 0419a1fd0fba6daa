"""`raglake run` processes against one bucket lake (moto's server on loopback, through tests/s3kit.py's proxy;
the results location in the bucket too): two writers landing runs at once, a run killed (SIGKILL) in the
middle of its landing and resumed with the same --run-id, and a run through a proxy that answers a fifth
of all requests 503 SlowDown or 500: every run lands whole, every score row once, nothing half-written."""

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
from tests.conftest import ROOT
from tests.s3kit import FaultProxy, MotoServer, list_keys, make_bucket, multipart_uploads, s3_env, use_endpoint

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

GOLDEN, TARGET = "data/golden/sample.jsonl", "replay:data/captures/local_search.jsonl"
METRICS = "recall_any_at_k,mrr_at_k,ndcg_at_k,abstention_accuracy,scope_miss"
N_ROWS = 66 * 5
CRASHKIT = str(Path(__file__).resolve().parent / "crashkit.py")


@dataclass
class Bucket:
    moto: MotoServer
    proxy: FaultProxy
    name: str
    env: dict[str, str]

    @property
    def lake(self) -> str:
        return f"s3://{self.name}/lake"

    def command(self, run_id: str, crash: tuple[str, int] | None = None) -> list[str]:
        head = [sys.executable, CRASHKIT, crash[0], str(crash[1])] if crash else [sys.executable, "-m", "raglake"]
        return [*head, "run", "--golden", GOLDEN, "--target", TARGET, "--lake", self.lake, "--results",
                f"s3://{self.name}/results", "--run-id", run_id, "-m", METRICS, "--batch-size", "10", "-q"]  # fmt: skip

    def run(self, run_id: str, crash: tuple[str, int] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.command(run_id, crash), cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )

    def keys(self, prefix: str = "") -> list[str]:
        return list_keys(self.moto.url, self.name, prefix)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[MotoServer, FaultProxy]]:
    with MotoServer() as moto, FaultProxy(moto.url) as proxy:
        yield moto, proxy


@pytest.fixture
def bucket(servers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bucket]:
    from prefect.settings import get_current_settings

    moto, proxy = servers
    name = f"c-{uuid.uuid4().hex[:10]}"
    make_bucket(moto.url, name)
    env = s3_env(proxy.url)
    env.update(PREFECT_API_URL=str(get_current_settings().api.url), TMPDIR=str(tmp_path))
    env.pop("RAGLAKE_RESULTS", None)
    proxy.reset()
    use_endpoint(monkeypatch, moto.url)  # this process reads straight from the server
    yield Bucket(moto, proxy, name, env)
    proxy.faults, proxy.hook, proxy.only = 0.0, None, None


def _rows(lake: str) -> list[tuple]:
    rows = connect(Lake(lake)).sql("SELECT run_id, case_id, metric, value, status FROM scores ORDER BY ALL").fetchall()
    return [tuple("nan" if isinstance(x, float) and math.isnan(x) else x for x in row) for row in rows]


def _by_run(rows: list[tuple]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {}
    for run_id, *rest in rows:
        out.setdefault(run_id, []).append(tuple(rest))
    return out


def _assert_whole(lake: str, run_ids: set[str]) -> dict[str, list[tuple]]:
    """Every run committed, N_ROWS score rows each, no (run, case, metric) twice, every run the same rows."""
    runs = _by_run(_rows(lake))
    assert set(runs) == run_ids
    for run_id, rows in runs.items():
        assert len(rows) == N_ROWS == len({(case, metric) for case, metric, *_ in rows}), run_id
    assert len({tuple(rows) for rows in runs.values()}) == 1  # the same inputs: the same rows
    return runs


def _no_leftovers(bucket: Bucket, tmp: Path | None = None) -> None:
    """No temp key, no unfinished multipart upload; with `tmp` (the processes' TMPDIR, none of them killed):
    no local temporary folder of a lake file left either."""
    if tmp is not None:
        assert not [p for p in tmp.iterdir() if p.name.startswith("raglake-")]
    keys = bucket.keys()
    assert not [k for k in keys if k.rsplit("/", 1)[-1].startswith(".") or k.endswith(".tmp")]
    assert multipart_uploads(bucket.moto.url, bucket.name) == []


def test_two_writers_land_runs_into_one_bucket_lake_at_once(bucket: Bucket, tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            bucket.command(run_id),
            cwd=ROOT,
            env=bucket.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for run_id in ("r-one", "r-two")
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    _assert_whole(bucket.lake, {"r-one", "r-two"})
    assert len(bucket.keys("lake/runs/")) == 2
    _no_leftovers(bucket, tmp_path)


def test_a_run_killed_while_uploading_its_scores_is_resumed_whole(bucket: Bucket) -> None:
    """SIGKILL while the scores file's PUT is on its way (the proxy kills the process and drops the
    request): nothing of the run is visible, and the same --run-id lands it whole."""
    proc = subprocess.Popen(bucket.command("r-kill"), cwd=ROOT, env=bucket.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    killed = threading.Event()

    def kill_on_scores(method: str, path: str, query: str) -> bool:
        if method == "PUT" and "/lake/scores/run_id=r-kill/" in path and not killed.is_set():
            killed.set()
            os.kill(proc.pid, signal.SIGKILL)
            return True
        return False

    bucket.proxy.hook = kill_on_scores
    out = proc.communicate(timeout=300)[0]
    bucket.proxy.hook = None
    assert killed.is_set() and proc.returncode == -signal.SIGKILL, out
    assert bucket.keys("lake/runs/") == [] and bucket.keys("lake/scores/") == []  # never half a file
    assert bucket.keys("lake/cases/")  # files written before the kill stay, unseen without a runs row
    assert _rows(bucket.lake) == []
    resumed = bucket.run("r-kill")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_whole(bucket.lake, {"r-kill"})
    _no_leftovers(bucket)


def test_a_run_killed_before_its_runs_row_is_resumed_whole(bucket: Bucket) -> None:
    """tests/crashkit.py kills the process at the write of the runs row (every other file is in the bucket)."""
    killed = bucket.run("r-late", crash=("landing", 1))
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert bucket.keys("lake/scores/") and bucket.keys("lake/runs/") == []
    assert _rows(bucket.lake) == []
    resumed = bucket.run("r-late")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _assert_whole(bucket.lake, {"r-late"})
    assert len(bucket.keys("lake/scores/")) == 1  # the killed attempt's file was replaced, not added to
    _no_leftovers(bucket)


def test_a_run_through_throttling_and_500s_lands_every_row_once(bucket: Bucket, tmp_path: Path) -> None:
    bucket.proxy.faults, bucket.proxy.max_run = 0.2, 3
    first = bucket.run("r-slow")
    assert first.returncode == 0, first.stdout + first.stderr
    again = bucket.run("r-slow-2")  # a second run: the staged batches found again, through the faults
    assert again.returncode == 0, again.stdout + again.stderr
    bucket.proxy.faults = 0.0
    assert bucket.proxy.injected["503"] > 10 and bucket.proxy.injected["500"] > 10
    _assert_whole(bucket.lake, {"r-slow", "r-slow-2"})
    _no_leftovers(bucket, tmp_path)
