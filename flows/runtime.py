"""Prefect's API server for the command line and the Python API: started before the first flow (a
server that does not start is a clear error before any work, not a traceback from inside the flow) and
stopped on demand (an interrupted run must not leave it behind)."""

from __future__ import annotations

import httpx
from prefect.client.orchestration import get_client
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

from raglake.errors import ConfigError
from raglake.prefect_settings import startup_hint


def start_api() -> str:
    """The Prefect API the flows will use: PREFECT_API_URL when set (it must answer), else Prefect's
    temporary (ephemeral) server, started now. The flows find it running and reuse it."""
    if url := PREFECT_API_URL.value():
        _check_api(url)
        return url
    server = SubprocessASGIServer()  # the process-wide instance Prefect's client uses
    try:
        server.start()
    except (RuntimeError, httpx.HTTPError) as e:
        server.stop()
        reason = str(e).strip().splitlines()[0][:300]
        raise ConfigError(
            f"{startup_hint(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())} (Prefect said: {reason})"
        ) from None
    return server.api_url


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
    """Stop Prefect's temporary server if this process started one (a no-op otherwise)."""
    SubprocessASGIServer().stop()
