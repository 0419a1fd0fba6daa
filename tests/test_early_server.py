"""Prefect's temporary server launched early (raglake.prefect_server, issue 29's cold start): adopted by
start_api only when the settings it started with are the ones Prefect holds, stopped when an API is
configured or nobody adopts it, never launched where an API may be configured; flows on it send no
heartbeats unless the user asked for them. Each scenario runs in a fresh interpreter (the suite's own
process talks to the session's test harness), with a temporary PREFECT_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raglake import prefect_server

SCENARIO = textwrap.dedent(
    """
    import json, os, sys
    from raglake import prefect_server, prefect_settings
    prefect_settings.apply()
    prefect_server.launch_early()
    early = prefect_server._early.get("launch")
    case = sys.argv[1]
    if case == "settings-changed-here":
        import prefect.settings
        from prefect.settings import temporary_settings, PREFECT_LOGGING_LEVEL
        context = temporary_settings(updates={PREFECT_LOGGING_LEVEL: "ERROR"})
        context.__enter__()
    if case in ("nobody-adopts", "nobody-adopts-later"):
        if case == "nobody-adopts-later":
            early._ready.wait()  # the child is up and answering
        prefect_server.discard_early()  # else at once: its child may not have been started yet
        early._ready.wait()
        process = early.process
        print(json.dumps({"child": process is not None, "alive": process is not None and process.poll() is None}))
        sys.exit(0)
    from raglake.flows import runtime
    from prefect.settings import get_current_settings
    if case == "signal-while-deciding":  # an interrupt's cleanup runs while start_api decides about the launch
        def interrupted(launched_with):
            runtime.stop_api()  # what raglake.cli.interrupt's handler runs before os._exit
            early._ready.wait()
            process = early.process
            print(json.dumps({"alive": process is not None and process.poll() is None}), flush=True)
            os._exit(0)
        runtime._same_settings = interrupted
    url = runtime.start_api()
    adopted = runtime._server["launch"] is early
    heartbeat = get_current_settings().flows.heartbeat_frequency
    runtime.stop_api()
    print(json.dumps({
        "launched_early": early is not None, "adopted": adopted, "heartbeat": heartbeat,
        "early_stopped": early is not None and early.process.poll() is not None, "url": url,
    }))
    """
)


def _scenario(case: str, tmp_path: Path, **env_extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), **env_extra)
    done = subprocess.run(
        [sys.executable, "-c", SCENARIO, case],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_early_server_is_adopted_and_its_flows_send_no_heartbeats(tmp_path: Path) -> None:
    seen = _scenario("plain", tmp_path)
    assert seen["launched_early"] and seen["adopted"]
    assert seen["heartbeat"] is None  # Prefect's default is 180 s, joined in 1 s steps at each flow's end
    assert seen["early_stopped"]  # stop_api stopped the adopted server


def test_a_heartbeat_the_user_asked_for_is_kept(tmp_path: Path) -> None:
    seen = _scenario("plain", tmp_path, PREFECT_FLOWS_HEARTBEAT_FREQUENCY="60")
    assert seen["adopted"] and seen["heartbeat"] == 60


def test_a_setting_made_in_this_process_only_gets_a_server_started_with_it(tmp_path: Path) -> None:
    seen = _scenario("settings-changed-here", tmp_path)
    assert seen["launched_early"] and not seen["adopted"]  # the child could not have seen the setting
    assert seen["early_stopped"]


def test_an_interrupt_while_start_api_decides_stops_the_early_server(tmp_path: Path) -> None:
    """The launch has left prefect_server and is not adopted yet: the interrupt's cleanup still finds it."""
    assert _scenario("signal-while-deciding", tmp_path) == {"alive": False}


@pytest.mark.parametrize("when", ["nobody-adopts", "nobody-adopts-later"])
def test_a_launch_nobody_adopts_is_stopped(when: str, tmp_path: Path) -> None:
    """An error right after the launch (its child not started yet: none is started) or once it answers."""
    seen = _scenario(when, tmp_path)
    assert not seen["alive"]  # no server left behind, whether its child had started or not
    if when == "nobody-adopts-later":
        assert seen["child"]


@pytest.mark.parametrize(
    "where",
    ["environment", "profile", "prefect.toml", "pyproject", "dotenv"],
)
def test_no_launch_where_an_api_may_be_configured(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    if where == "environment":
        monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")
    elif where == "profile":
        (tmp_path / "home" / "profiles.toml").write_text(
            'active = "mine"\n[profiles.mine]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n'
        )
    elif where == "prefect.toml":
        (tmp_path / "prefect.toml").write_text('[api]\nurl = "http://127.0.0.1:4200/api"\n')
    elif where == "pyproject":
        (tmp_path / "pyproject.toml").write_text('[tool.prefect.api]\nurl = "http://127.0.0.1:4200/api"\n')
    else:
        (tmp_path / ".env").write_text("PREFECT_API_URL=http://127.0.0.1:4200/api\n")
    assert not prefect_server.no_api_configured()


def test_a_launch_goes_ahead_where_nothing_is_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other side of the test above: a plain folder and a profile without an API URL. Prefect's settings
    in this process are hidden (the suite's harness may have set an API URL in them)."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "home").mkdir()
    profile = 'active = "local"\n[profiles.local]\nPREFECT_LOGGING_LEVEL = "INFO"\n'
    (tmp_path / "home" / "profiles.toml").write_text(profile)
    monkeypatch.delitem(sys.modules, "prefect.settings", raising=False)
    assert prefect_server.no_api_configured()


def test_a_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    """The server's process exits at once (here: a `uvicorn` that fails on import): the launch says so at
    once, with the exit status, instead of waiting out the start-up time-out."""
    (tmp_path / "uvicorn.py").write_text("raise SystemExit(1)\n")
    launch = prefect_server.Launch({**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120).start()
    with pytest.raises(RuntimeError, match="exited with code 1"):
        launch.wait()
    assert launch.process is not None and launch.process.poll() == 1


def test_a_working_folder_that_is_gone_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A removed working folder (os.getcwd() raises): no launch, and no traceback from the check itself."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    monkeypatch.delitem(sys.modules, "prefect.settings", raising=False)
    assert prefect_server.no_api_configured() is False
