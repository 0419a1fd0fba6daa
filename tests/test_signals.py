"""SIGTERM and SIGINT end a run promptly: the helpers the run started (Prefect's temporary API server,
the local judge) are stopped, nothing half-done is committed, and the same --run-id finishes the run
(issue 10, item 4). The bound on "promptly" is a behaviour, not a benchmark: before, a judge task kept
the process alive until its calls timed out (minutes)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from raglake.lake.landing import is_committed
from raglake.lake.query import fetch
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from tests.conftest import FIXTURES, ROOT
from tests.fake_openai import FakeOpenAI, hang

GRACE_S = 30  # far above the fraction of a second it takes; far below the judge's minutes of retries
GOLDEN, CAPTURES = FIXTURES / "mini_golden.jsonl", FIXTURES / "mini_captures.jsonl"


def _group(pgid: int) -> list[str]:
    """Command lines of the live processes in process group `pgid` (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pgid:
                continue
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (ProcessLookupError, FileNotFoundError, PermissionError):
            continue  # gone meanwhile
        if state != "Z":
            found.append(cmdline)
    return found


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """`raglake ARGS` in its own process group, so that whatever it starts can be found afterwards."""
    return subprocess.Popen(
        [sys.executable, "-m", "raglake", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _wait_for(condition, what: str, process: subprocess.Popen, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"raglake exited ({process.returncode}) before {what}:\n{process.stdout.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"no {what} within {timeout_s:g} s")
        time.sleep(0.2)


def _terminate(process: subprocess.Popen, signum: int = signal.SIGTERM) -> str:
    """Send `signum` to raglake alone (not its group) and wait GRACE_S at most; its output."""
    process.send_signal(signum)
    try:
        out, _ = process.communicate(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        pytest.fail(f"raglake was still running {GRACE_S} s after {signal.Signals(signum).name}:\n{out[-3000:]}")
    leftovers = _group(process.pid)
    if leftovers:
        os.killpg(process.pid, signal.SIGKILL)
    assert not leftovers, f"left running after {signal.Signals(signum).name}: {leftovers}"
    return out


@pytest.mark.e2e
@pytest.mark.usefixtures("prefect_harness")
def test_sigterm_while_the_judge_hangs_ends_the_run_and_the_same_run_id_finishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from raglake.cli import main

    lake = str(tmp_path / "lake")
    env = {**os.environ, "OPENAI_API_KEY": "test-key", "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    with FakeOpenAI(handler=lambda body: hang(600)) as judge:
        args = [
            "run",
            "--golden",
            str(GOLDEN),
            "--target",
            f"replay:{CAPTURES}",
            "--lake",
            lake,
            "--run-id",
            "r-sig",
            "--metrics",
            "recall_any_at_k,groundedness",
            "--judge-base-url",
            judge.url,
            "--judge-model",
            "fake",
            "--judge-timeout",
            "300",
            "--orchestration",
            "prefect",  # a flow run on a temporary server, which SIGTERM must stop (the local judge's test below
            # runs in process, as `auto` chooses for a small run without an API)
            "--quiet",
        ]
        process = _start(args, env)
        _wait_for(lambda: judge.count > 0, "judge call", process)
        out = _terminate(process)
        assert process.returncode == 128 + signal.SIGTERM, out
        assert "interrupted by SIGTERM" in out and "run r-sig was not committed" in out and "--run-id r-sig" in out
        assert "Traceback" not in out
        assert not is_committed(Lake(lake), "r-sig")

        judge.handler = None  # the judge answers now: the same command finishes the run, here through the
        # console script's entry point in this process, reporting to the session's Prefect test server (the
        # interrupted process above is the one that had to start, and stop, a temporary server of its own)
        monkeypatch.setenv("OPENAI_API_KEY", env["OPENAI_API_KEY"])
        monkeypatch.setattr(sys, "argv", ["raglake", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        captured = capsys.readouterr()
        assert not exited.value.code, captured.out + captured.err
    rows = fetch(open_lake(lake).con, "SELECT metric, status FROM scores WHERE run_id = 'r-sig'")
    cases = len(GOLDEN.read_text().splitlines())
    # one row per case × metric
    assert sorted(m for m, _ in rows) == ["groundedness"] * cases + ["recall_any_at_k"] * cases
    assert ("groundedness", "ok") in rows and not {s for _, s in rows} & {"judge_error", "parse_error"}


_WORKER = textwrap.dedent("""
    import concurrent.futures, sys, threading, time
    from pathlib import Path
    from raglake.cli import interrupt

    marker = Path(sys.argv[1])
    stuck = threading.Event()

    def work():  # a task thread that never finishes on its own (a judge retrying a dead server)
        pool = concurrent.futures.ThreadPoolExecutor(2)
        future = pool.submit(lambda: (stuck.set(), time.sleep(3600)))
        return future.result()

    with interrupt.stoppable(lambda: "note: the run was not committed"), \\
            interrupt.cleanup(lambda: marker.write_text("stopped")):
        print("started", flush=True)
        interrupt.run_in_worker(work)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_runs_the_cleanups_and_ends_a_process_whose_threads_never_finish(tmp_path: Path, signum: int) -> None:
    marker = tmp_path / "stopped"
    process = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(marker)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdout.readline().strip() == "started"
    time.sleep(0.5)  # the worker thread is in its endless task now
    out = _terminate(process, signum)
    assert process.returncode == 128 + signum
    assert marker.read_text() == "stopped"
    assert f"interrupted by {signal.Signals(signum).name}" in out and "note: the run was not committed" in out


def _local_judge_missing() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (extra local-judge)"
    from raglake.errors import ConfigError
    from raglake.judge.local import gguf_path

    try:
        gguf_path()
    except ConfigError as e:
        return str(e)
    return None


@pytest.mark.e2e
@pytest.mark.skipif(_local_judge_missing() is not None, reason=_local_judge_missing() or "")
def test_sigterm_stops_the_local_judge_server(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)
    process = _start(
        [
            "run",
            "--golden",
            str(GOLDEN),
            "--target",
            f"replay:{CAPTURES}",
            "--lake",
            str(tmp_path / "lake"),
            "--metrics",
            "groundedness",
            "--judge",
            "local",
            "--quiet",
        ],
        env,
    )
    _wait_for(lambda: any("llama_cpp.server" in c for c in _group(process.pid)), "local judge server", process)
    out = _terminate(process)  # asserts that nothing of the group, the llama.cpp server included, is left
    assert process.returncode == 128 + signal.SIGTERM and "interrupted by SIGTERM" in out


@pytest.mark.e2e
@pytest.mark.parametrize("after_s", [0.5, 2.5])
def test_sigterm_while_the_temporary_server_starts_leaves_no_server(after_s: float, tmp_path: Path) -> None:
    """The server's child exists seconds before it answers (a new PREFECT_HOME: its database is made first); a
    SIGTERM then must stop it too, not leave it running with nobody to stop it: while the command still imports
    Prefect and the flows (0.5 s), and while it waits for the server to answer (2.5 s)."""
    env = {**os.environ, "COLUMNS": "200", "PREFECT_HOME": str(tmp_path / "prefect-home")}
    env.pop("PREFECT_API_URL", None)
    args = ["run", "--golden", str(GOLDEN), "--target", f"replay:{CAPTURES}", "--lake", str(tmp_path / "lake")]
    process = _start([*args, "--orchestration", "prefect", "--quiet"], env)
    _wait_for(lambda: any("uvicorn" in c for c in _group(process.pid)), "Prefect's temporary server", process)
    time.sleep(after_s)
    out = _terminate(process)  # asserts that nothing of the group, the server included, is left
    assert process.returncode == 128 + signal.SIGTERM, out
