"""Prefect's temporary API server, launched without importing Prefect: `raglake run` and `raglake.evaluate`
start it as soon as their inputs are checked, so that its start-up (~3-4 s of a child process's CPU:
FastAPI, SQLAlchemy, the database) overlaps their own import of Prefect and the flows, the model's
load and the planning, instead of following them (issue 29's cold start).

The server is the one Prefect's own ephemeral mode starts (`uvicorn` on Prefect's `create_app` factory,
UI off, ephemeral services only, in a child process). A launch is speculative: raglake.flows.runtime
adopts it only when Prefect's settings in this process, once imported, match the ones the child read
(else it stops it and starts one with them); nothing is launched when an API is configured where this
module can see it (the environment, Prefect's settings when already imported, the active profile) or when
the working folder holds Prefect settings of its own (prefect.toml, pyproject's [tool.prefect], .env).
Once the health check answers, a waiting thread warms the server (its first API and database requests
cost ~0.4 s) while the caller goes on."""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import httpx

from raglake.prefect_settings import STARTUP_TIMEOUT

API_URL = "PREFECT_API_URL"
EPHEMERAL = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
_PORT_TAKEN = 3  # uvicorn's exit status when the port was taken in the meantime


class Launch:
    """One server child on a free loopback port, and the thread that waits for it to answer. Made, then kept
    where an interrupt's cleanup finds it, then start()ed: a signal between two of those steps cannot leave
    a child that nobody stops."""

    def __init__(self, env: dict[str, str], timeout: float) -> None:
        self.env = env
        self.deadline = time.monotonic() + timeout
        self.process: subprocess.Popen | None = None
        self.url = ""
        self.error: Exception | None = None
        self.ok = False
        self._stopped = False
        self._lock = threading.Lock()  # stop() and a child's start do not cross: a stopped launch starts none
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._start, name="raglake-prefect-server", daemon=True)

    def start(self) -> Launch:
        self._thread.start()
        return self

    def _start(self) -> None:
        try:
            while True:
                port = _free_port()
                with self._lock:
                    if self._stopped:
                        raise RuntimeError("Ephemeral server launch was stopped.")
                    self.process = subprocess.Popen(server_command(port), env=self.env)
                self.url = f"http://127.0.0.1:{port}/api"
                if _wait_healthy(self.process, self.url, self.deadline):
                    self.ok = True
                    _warm(self.url)
                    return
                if self.process.returncode != _PORT_TAKEN:
                    raise RuntimeError(
                        f"Ephemeral server process exited with code {self.process.returncode} while starting."
                    )
        except (RuntimeError, OSError, httpx.HTTPError) as e:  # wait() raises it: one clear error, not a trace
            self.error = e
        finally:
            self._ready.set()

    def wait(self) -> str:
        """The server's API URL once it answers; its start's error, re-raised, if it did not start."""
        self._ready.wait()
        if not self.ok:
            self.stop()
            raise self.error or RuntimeError("Ephemeral server process did not start.")
        return self.url

    def stop(self) -> None:
        """Stop the child (a no-op when it has ended); a launch stopped before its child started starts none."""
        with self._lock:
            self._stopped = True
            process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_early: dict[str, object] = {}  # "launch": the speculative launch, "prefect_env": the PREFECT_* variables it saw


def launch_early() -> None:
    """Start the temporary server now, in the background, unless an API is configured (or may be: see the
    module docstring) or one was launched already. raglake.flows.runtime.start_api adopts it or stops it;
    its start-up time-out is Prefect's (raglake.prefect_settings puts it in the environment)."""
    if "launch" in _early or not no_api_configured():
        return
    try:
        timeout = float(os.environ.get(STARTUP_TIMEOUT, "120"))
    except ValueError:  # Prefect's settings say what is wrong with it, when they are read
        return
    _early["prefect_env"] = prefect_environment()
    _early["launch"] = launch = Launch({**os.environ, **EPHEMERAL}, timeout)
    atexit.register(launch.stop)
    launch.start()


def early() -> tuple[Launch, dict[str, str]] | None:
    """The speculative launch and the PREFECT_* variables it started with (None: none), left in place: the
    caller keeps it where its own cleanup finds it, then take_early() hands it over."""
    launch = _early.get("launch")
    return (launch, _early.get("prefect_env", {})) if isinstance(launch, Launch) else None  # type: ignore[return-value]


def take_early() -> tuple[Launch, dict[str, str]] | None:
    """early(), handed over once (None: none)."""
    handed = early()
    _early.clear()
    return handed


def discard_early() -> None:
    """Stop a launch nobody adopted (the run ended in an error before it needed the API)."""
    handed = take_early()
    if handed is not None:
        handed[0].stop()


def prefect_environment() -> dict[str, str]:
    """This process's PREFECT_* environment variables (what a server child reads besides its files)."""
    return {k: v for k, v in os.environ.items() if k.startswith("PREFECT_")}


def no_api_configured() -> bool:
    """False where an API may be configured: the environment, Prefect's settings in this process (a test
    harness sets them without the environment), the active profile, or the working folder's own settings."""
    if os.environ.get(API_URL):
        return False
    settings = sys.modules.get("prefect.settings")
    if settings is not None and settings.PREFECT_API_URL.value():
        return False
    try:
        cwd = Path.cwd()
    except OSError:  # the working folder was removed: its settings cannot be read, so assume there may be some
        return False
    if (cwd / "prefect.toml").exists() or _mentions(cwd / "pyproject.toml", "[tool.prefect"):
        return False
    if _mentions(cwd / ".env", "PREFECT_"):
        return False
    return not _profile_names_api()


def _mentions(path: Path, text: str) -> bool:
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def _profile_names_api() -> bool:
    """Whether the active profile of Prefect's profiles file sets PREFECT_API_URL (an unreadable file: yes,
    to be safe)."""
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    path = Path(os.environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml").expanduser()
    if not path.exists():
        return False
    try:
        profiles = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return True
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    return bool((profiles.get("profiles", {}).get(active) or {}).get(API_URL))


def server_command(port: int) -> list[str]:
    """The command Prefect's ephemeral mode runs (prefect.server.api.server.SubprocessASGIServer)."""
    spec = importlib.util.find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("Prefect is not installed")
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(Path(next(iter(spec.submodule_search_locations))).parent),
        "--factory",
        "prefect.server.api.server:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "error",
        "--lifespan",
        "on",
    ]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(process: subprocess.Popen, url: str, deadline: float) -> bool:
    """True once `url`/health answers 200; False if the server exited first; RuntimeError at the deadline."""
    with httpx.Client() as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if client.get(f"{url}/health", timeout=5).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            time.sleep(0.05)
    raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")


def _warm(url: str) -> None:
    """The requests a flow's start makes first (the version check, a read of the database): the server's
    lazy set-up happens now, not on the flow's path. A failure here is the flow's to meet and say."""
    try:
        with httpx.Client(timeout=30) as client:
            client.get(f"{url}/admin/version")
            client.post(f"{url}/flows/filter", json={"limit": 1})
    except httpx.HTTPError:
        return
