"""Prefect's API server for the command line and the Python API: started before the first flow (a
server that does not start is a clear error before any work, not a traceback from inside the flow) and
stopped on demand (an interrupted run must not leave it behind).

The temporary server is the one Prefect's own ephemeral mode starts, launched by raglake.prefect_server
rather than through `prefect.server.api.server.SubprocessASGIServer`: importing that module loads the
whole server (FastAPI, SQLAlchemy, every API route) into this process, ~2-4 s of CPU a run for a server
that runs in the child anyway; and raglake launches it early, before this module is imported. Prefect in
this process then learns the server's URL as PREFECT_API_URL. Prefect's engines, which the first flow
would import, are imported with this module (while the server starts)."""

from __future__ import annotations

import atexit
import logging
import os
import threading

import httpx
import prefect
import prefect.flow_engine  # noqa: F401  (imported by the first flow call otherwise: ~0.3 s on its path)
import prefect.task_engine  # noqa: F401
from prefect.client.orchestration import get_client
from prefect.context import SettingsContext, refresh_global_settings_context
from prefect.logging.handlers import PrefectConsoleHandler
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    Settings,
    get_current_settings,
)

from raglake import prefect_server
from raglake.errors import ConfigError, RaglakeError
from raglake.prefect_settings import startup_hint

_API_URL = prefect_server.API_URL
_lock = threading.Lock()
_server: dict[str, object] = {}  # "launch": the running server (prefect_server.Launch), "url": its API URL


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
    (ephemeral) server: the one raglake.prefect_server launched early when Prefect's settings here match
    the ones it started with, else one started now; named as PREFECT_API_URL for this process and its
    children. Flows on the temporary server send no heartbeats (see _without_heartbeats). Prefect's console
    output of a run that fails with a raglake error is left to raglake (_ClearErrors)."""
    quiet_clear_errors()
    with _lock:
        if "url" in _server:
            _without_heartbeats()
            return str(_server["url"])
        early = prefect_server.early()
        if early:  # from here on stop_api (an interrupt's cleanup) finds it here, before it leaves prefect_server
            _server["launch"] = early[0]
            prefect_server.take_early()
        if url := PREFECT_API_URL.value():
            if early:
                early[0].stop()
                _server.pop("launch", None)
            _check_api(url)
            return url
        timeout = PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()
        launch = early[0] if early and _same_settings(early[1]) else None
        if early and launch is None:
            early[0].stop()
        try:
            if launch is None:
                launch = _server["launch"] = prefect_server.Launch(_server_env(), timeout)
                launch.start()  # kept in _server first: stop_api stops it, also while it starts
            url = launch.wait()
        except (RuntimeError, OSError, httpx.HTTPError) as e:
            _server.pop("launch", None)
            reason = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            raise ConfigError(f"{startup_hint(timeout)} (Prefect said: {reason})") from None
        _server["url"] = url
        os.environ[_API_URL] = url
        refresh_global_settings_context()
        _without_heartbeats()
        atexit.register(stop_api)
        return url


def _same_settings(launched_with: dict[str, str]) -> bool:
    """Whether a server launched early read the settings Prefect holds here now: the same PREFECT_*
    variables, and no setting made in this process only (what a child could not have seen)."""
    if prefect_server.prefect_environment() != launched_with:
        return False
    here = get_current_settings().to_environment_variables(exclude_unset=True)
    return here == Settings().to_environment_variables(exclude_unset=True)


def _server_env() -> dict[str, str]:
    """This process's environment and Prefect settings (profile included), as Prefect hands them to
    its ephemeral server."""
    env = {**os.environ, **prefect_server.EPHEMERAL}
    return {**env, **get_current_settings().to_environment_variables(exclude_unset=True)}


def _without_heartbeats() -> None:
    """No flow-run heartbeats on raglake's temporary server, unless the user asked for them: they tell a
    lasting server that a run's process died, and the temporary server dies with the process. Prefect's
    heartbeat thread sleeps in 1 s steps and is joined when a flow ends: ~0.5 s (up to 1 s) of every
    flow. Prefect offers no setting to switch them off (PREFECT_FLOWS_HEARTBEAT_FREQUENCY is >= 30 s), so
    the global settings are copied with `flows.heartbeat_frequency` None, which Prefect reads as "none"."""
    if "PREFECT_FLOWS_HEARTBEAT_FREQUENCY" in prefect_server.prefect_environment():
        return
    current = prefect.context.GLOBAL_SETTINGS_CONTEXT
    settings = current.settings
    if settings.flows.heartbeat_frequency is None:
        return
    flows = settings.flows.model_copy(update={"heartbeat_frequency": None})
    prefect.context.GLOBAL_SETTINGS_CONTEXT = SettingsContext(
        profile=current.profile, settings=settings.model_copy(update={"flows": flows})
    )


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


def stop_api() -> None:
    """Stop the temporary server if this process started one (a no-op otherwise); PREFECT_API_URL is
    then unset again, so that a later start_api() starts a fresh one. A server still starting, or launched
    early and not adopted yet, is stopped too."""
    prefect_server.discard_early()
    launch, url = _server.pop("launch", None), _server.pop("url", None)
    if launch is None:
        return
    launch.stop()  # type: ignore[attr-defined]
    if url is not None and os.environ.get(_API_URL) == url:  # None: stopped while it started, nothing was set
        del os.environ[_API_URL]
        refresh_global_settings_context()
