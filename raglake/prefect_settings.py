"""The Prefect settings raglake runs with, in one place: the CLI applies them first thing, and importing
the flows package applies them for the Python entry point (`evaluate(...)` and `rescore(...)` of
raglake.flows; `flows` in a checkout).

They are environment defaults: a variable the user set always wins. Prefect reads its settings once,
when `prefect` is first imported, so they must be in place before that; when Prefect is already
imported, `apply()` rebuilds its global settings (what `prefect.context` offers plugins for this).
This module never imports Prefect: commands that only read the lake never load it."""

from __future__ import annotations

import os
import sys

STARTUP_TIMEOUT = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"
LOGGING_LEVEL = "PREFECT_LOGGING_LEVEL"
DASK_LOGGING = "DASK_DISTRIBUTED__LOGGING__DISTRIBUTED"  # dask.config's distributed.logging.distributed
# the variables `verbose` moves: (its level with --verbose, without)
VERBOSE_LEVELS = {LOGGING_LEVEL: ("INFO", "WARNING"), DASK_LOGGING: ("info", "warning")}

DEFAULTS = {
    # raglake runs offline by default: Prefect's ephemeral server must not phone home
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # on a busy 2-core machine the ephemeral server may need far more than Prefect's default 20 s
    STARTUP_TIMEOUT: "120",
    # Prefect's flow and task logs only with `--verbose` (INFO)
    LOGGING_LEVEL: "WARNING",
    # Dask's `distributed` logs (~30 INFO lines per LocalCluster of `--runner dask`) only with `--verbose`;
    # read when `distributed` is imported, and inherited by the cluster's worker processes
    DASK_LOGGING: "warning",
    # Prefect's client already retries 408/429/502/503, connection resets and protocol errors, 5
    # times with 2^n s backoff (~1 min). A server busy with a second writer (SQLite locked: 503) can
    # stay busy longer: 7 retries wait ~4 min in all. 504 (a proxy's gateway time-out) is transient too.
    "PREFECT_CLIENT_MAX_RETRIES": "7",
    "PREFECT_CLIENT_RETRY_EXTRA_CODES": "504",
}

_ours: set[str] = set()  # the variables apply() set (the user's own are never touched)


def apply(*, verbose: bool | None = None) -> dict[str, str]:
    """Put raglake's Prefect defaults into the environment where the user set nothing; `verbose`
    (the CLI's --verbose) switches Prefect's log level between INFO and WARNING unless the user set
    it. Returns the variables this call changed."""
    wanted = dict(DEFAULTS)
    if verbose is not None:
        wanted.update({key: levels[0] if verbose else levels[1] for key, levels in VERBOSE_LEVELS.items()})
    changed = {}
    for key, value in wanted.items():
        if key in os.environ and key not in _ours:
            continue  # the user's
        if key in _ours and not (key in VERBOSE_LEVELS and verbose is not None):
            continue  # set by an earlier call; only an explicit `verbose` moves the log levels
        if os.environ.get(key) != value:
            os.environ[key] = changed[key] = value
        _ours.add(key)
    if changed and "prefect.context" in sys.modules:  # Prefect already read its settings: read them again
        _reload_prefect(LOGGING_LEVEL in changed)
    return changed


def _reload_prefect(logging_changed: bool) -> None:
    """Prefect's global settings rebuilt from the environment (what `prefect.context` offers plugins
    that set variables after import) and, for a new log level, its logging set up again."""
    sys.modules["prefect.context"].refresh_global_settings_context()
    logging_setup = sys.modules.get("prefect.logging.configuration")
    if logging_changed and logging_setup is not None and logging_setup.PROCESS_LOGGING_CONFIG:
        logging_setup.setup_logging()


def startup_hint(timeout_s: float) -> str:
    """What to do when Prefect's temporary API server did not start within `timeout_s`."""
    return (
        f"Prefect's temporary API server did not start within {STARTUP_TIMEOUT}={timeout_s:g} s. Run against "
        f"a Prefect server instead (start one with `prefect server start`, then set "
        f"PREFECT_API_URL=http://127.0.0.1:4200/api), or give the temporary one more time: "
        f"{STARTUP_TIMEOUT}={max(300, 2 * int(timeout_s))}"
    )
