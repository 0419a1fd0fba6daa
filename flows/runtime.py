"""Prefect's API server for the command line and the Python API: started before the first flow (a
server that does not start is a clear error before any work, not a traceback from inside the flow) and
stopped on demand (an interrupted run must not leave it behind).

The temporary server is the one Prefect's own ephemeral mode starts (`uvicorn` on Prefect's
`create_app` factory, UI off, ephemeral services only, in a child process), launched here rather than
through `prefect.server.api.server.SubprocessASGIServer`: importing that module loads the whole server
(FastAPI, SQLAlchemy, every API route) into this process, ~2-4 s of CPU a run for a server that runs in
the child anyway. Prefect in this process then learns the server's URL as PREFECT_API_URL."""

from __future__ import annotations

import atexit
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import prefect
from prefect.client.orchestration import get_client
from prefect.context import refresh_global_settings_context
from prefect.logging.handlers import PrefectConsoleHandler
from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, get_current_settings

from raglake.errors import ConfigError, RaglakeError
from raglake.prefect_settings import startup_hint

_API_URL = "PREFECT_API_URL"
_lock = threading.Lock()
_server: dict[str, object] = {}  # "process": the running server, "url": its API URL


class _ClearErrors(logging.Filter):
    """Leaves out of Prefect's console output its report of a flow or task run that failed with a raglake
    error (the ERROR line and its traceback, then the task's "Finished in state Failed"): the command line
    and `evaluate()` say that error in one line. Prefect's API (its UI) still gets every record, and with
    --verbose (Prefect's level INFO or lower) the console does too."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()  # the runs whose failure was left out

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(("prefect.flow_runs", "prefect.task_runs")):
            return True
        if logging.getLogger("prefect").getEffectiveLevel() <= logging.INFO:
            return True
        run = str(getattr(record, "task_run_id", None) or getattr(record, "flow_run_id", None))
        if record.exc_info and isinstance(record.exc_info[1], RaglakeError):
            self.failed.add(run)
            return False
        return not (run in self.failed and record.getMessage().startswith("Finished in state"))


def quiet_clear_errors() -> None:
    """Put _ClearErrors on Prefect's console handler (once; again after Prefect set its logging up anew)."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler) and not any(isinstance(f, _ClearErrors) for f in handler.filters):
            handler.addFilter(_ClearErrors())


def start_api() -> str:
    """The Prefect API the flows will use: PREFECT_API_URL when set (it must answer), else a temporary
    (ephemeral) server, started now and named as PREFECT_API_URL for this process and its children.
    Prefect's console output of a run that fails with a raglake error is left to raglake (_ClearErrors)."""
    quiet_clear_errors()
    with _lock:
        if "url" in _server:
            return str(_server["url"])
        if url := PREFECT_API_URL.value():
            _check_api(url)
            return url
        timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
        try:
            process, url = _launch(timeout)
        except (RuntimeError, httpx.HTTPError) as e:
            reason = str(e).strip().splitlines()[0][:300]
            raise ConfigError(f"{startup_hint(timeout)} (Prefect said: {reason})") from None
        _server.update(process=process, url=url)
        os.environ[_API_URL] = url
        refresh_global_settings_context()
        atexit.register(stop_api)
        return url


def _launch(timeout: float) -> tuple[subprocess.Popen, str]:
    """Prefect's ephemeral server on a free loopback port, once its health check answers."""
    deadline = time.monotonic() + timeout
    while True:
        port = _free_port()
        process = subprocess.Popen(_server_command(port), env=_server_env())
        url = f"http://127.0.0.1:{port}/api"
        try:
            if _wait_healthy(process, url, deadline):
                return process, url
        except BaseException:
            _terminate(process)
            raise
        if process.returncode != 3:  # 3: the port was taken in the meantime; try another
            raise RuntimeError(f"Ephemeral server process exited with code {process.returncode} while starting.")


def _server_command(port: int) -> list[str]:
    """The command Prefect's ephemeral mode runs (prefect.server.api.server.SubprocessASGIServer)."""
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(Path(prefect.__file__).parent.parent),
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


def _server_env() -> dict[str, str]:
    """This process's environment and Prefect settings (profile included), as Prefect hands them to
    its ephemeral server."""
    ephemeral = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    return {**os.environ, **ephemeral, **get_current_settings().to_environment_variables(exclude_unset=True)}


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
            time.sleep(0.1)
    raise RuntimeError("Timed out while attempting to connect to ephemeral Prefect API server.")


def _check_api(url: str) -> None:
    """One health check through Prefect's own client (its auth, headers and TLS settings)."""
    try:
        with get_client(sync_client=True) as client:
            problem = client.api_healthcheck()
    except (RuntimeError, httpx.HTTPError) as e:  # the client checks the server's version on entry
        problem = e
    if problem is not None:
        reason = str(problem).strip().splitlines()[0][:300] if str(problem).strip() else type(problem).__name__
        raise ConfigError(
            f"the Prefect API at PREFECT_API_URL={url} does not answer ({reason}): start that server, "
            f"or unset PREFECT_API_URL to let raglake start a temporary one"
        )


def _terminate(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def stop_api() -> None:
    """Stop the temporary server if this process started one (a no-op otherwise); PREFECT_API_URL is
    then unset again, so that a later start_api() starts a fresh one."""
    process, url = _server.pop("process", None), _server.pop("url", None)
    if process is None:
        return
    _terminate(process)  # type: ignore[arg-type]
    if os.environ.get(_API_URL) == url:
        del os.environ[_API_URL]
        refresh_global_settings_context()
