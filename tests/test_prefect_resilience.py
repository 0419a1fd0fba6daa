"""Prefect is not a single point of failure (issue 10, item 4): a temporary API server that does not
start is a clear error saying what to do; transient API errors are retried; the CLI's Prefect settings
hold for the Python entry point too; commands that only read the lake never start (or import) Prefect."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from raglake.prefect_settings import DEFAULTS
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

GOLDEN, TARGET = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without the settings raglake defaults (the tests' conftest sets some) and
    without a Prefect API URL."""
    env = {k: v for k, v in os.environ.items() if k not in DEFAULTS and k != "PREFECT_API_URL"}
    return {**env, **extra}


def _python(script: str, env: dict[str, str], *args: str) -> dict:
    """Run `script` in a fresh interpreter; the JSON object its last output line holds."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _closed_port() -> int:
    """A loopback port nobody listens on: any Prefect API call to it fails."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_temporary_prefect_server_that_does_not_start_is_a_clear_error(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    env = _clean_env(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1", COLUMNS="400")
    args = ["run", "--golden", GOLDEN, "--target", TARGET, "--lake", str(lake), "--orchestration", "prefect"]
    done = subprocess.run(
        [sys.executable, "-m", "raglake", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = " ".join(done.stdout.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert out.startswith(
        "error: Prefect's temporary API server did not start within "
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=1 s"
    ), out
    assert "PREFECT_API_URL=" in out and "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=300" in out
    assert "Traceback" not in done.stdout + done.stderr
    assert not lake.exists()


def test_a_prefect_api_url_that_does_not_answer_is_a_clear_error(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    env = _clean_env(PREFECT_API_URL=f"http://127.0.0.1:{_closed_port()}/api", COLUMNS="400")
    done = subprocess.run(
        [sys.executable, "-m", "raglake", "run", "--golden", GOLDEN, "--target", TARGET, "--lake", str(lake)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = " ".join(done.stdout.split())
    assert done.returncode == 2, done.stdout + done.stderr
    assert out.startswith(f"error: the Prefect API at PREFECT_API_URL={env['PREFECT_API_URL']} does not answer"), out
    assert "unset PREFECT_API_URL" in out and "Traceback" not in done.stdout + done.stderr
    assert not lake.exists()


# After importing the flows, Prefect's own settings and its own client: 5 × 503 then 2 × 504 (a proxy's
# gateway time-out) is transient, and the request succeeds; with Prefect's defaults (5 retries, 504 not
# retried) it fails.
_ENTRY_POINT = """
    import asyncio, json, logging, sys
    {first}
    import raglake.flows.evaluate, raglake.flows.rescore  # the documented Python entry points
    import httpx
    from prefect.client.base import PrefectHttpxAsyncClient
    from prefect.settings import get_current_settings

    replies = [503] * 5 + [504] * 2 + [200]

    async def api(scope, receive, send):  # Retry-After: 0, so that Prefect's back-off does not wait
        await send({{"type": "http.response.start", "status": replies.pop(0), "headers": [(b"retry-after", b"0")]}})
        await send({{"type": "http.response.body", "body": b"{{}}"}})

    async def ask():
        client = PrefectHttpxAsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://prefect.test/api",
                                         raise_on_all_errors=False)
        async with client:
            return (await client.get("/health")).status_code

    s = get_current_settings()
    print(json.dumps({{"max_retries": s.client.max_retries, "extra_codes": sorted(s.client.retry_extra_codes),
                      "analytics": s.server.analytics_enabled, "startup": s.server.ephemeral.startup_timeout_seconds,
                      "logging": s.logging.level,
                      "prefect_logger": logging.getLevelName(logging.getLogger("prefect").level),
                      "status": asyncio.run(ask())}}))
"""


def test_the_python_entry_point_runs_with_the_cli_settings_and_retries_transient_api_errors() -> None:
    expected = {
        "max_retries": 7,
        "extra_codes": [504],
        "analytics": False,
        "startup": 120,
        "logging": "WARNING",
        "prefect_logger": "WARNING",
        "status": 200,
    }
    for first in ("", "import prefect, prefect.flows  # Prefect imported (its settings read) before the flows"):
        assert _python(_ENTRY_POINT.format(first=first), _clean_env()) == expected, first
    users = _clean_env(PREFECT_CLIENT_MAX_RETRIES="2", PREFECT_LOGGING_LEVEL="ERROR")
    got = _python(_ENTRY_POINT.format(first=""), users)
    assert (got["max_retries"], got["logging"], got["status"]) == (2, "ERROR", 503)  # the user's settings win


_READ_COMMANDS = """
    import json, sys
    from raglake.cli import main

    codes = {}
    for args in json.loads(sys.argv[1]):
        sys.argv = ["raglake", *args]
        try:
            main()
            codes[" ".join(args)] = 0
        except SystemExit as e:
            codes[" ".join(args)] = e.code or 0
    print(json.dumps({"codes": codes, "prefect": sorted(m for m in sys.modules if m.split(".")[0] == "prefect")[:5]}))
"""


def test_commands_that_read_the_lake_never_start_or_import_prefect(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    land(lake, GOLDEN, TARGET, "r-one")
    land(lake, GOLDEN, TARGET, "r-two", minutes=1)
    commands = [
        ["runs"],
        ["breakdown"],
        ["breakdown", "--by", "target"],
        ["compare", "r-one", "r-two"],
        ["trend", "--metric", "recall_any_at_k"],
        ["sql", "SELECT count(*) FROM scores"],
        ["coverage"],
        ["health"],
        ["report", "r-two", "--against", "r-one", "-o", str(tmp_path / "report.html")],
        ["gate", "--candidate", "r-two", "--baseline", "r-one", "--rules", str(ROOT / "data" / "gate.yaml")],
        ["rescore", "--all", "--dry-run"],
    ]
    env = _clean_env(RAGLAKE_LAKE=lake, PREFECT_API_URL=f"http://127.0.0.1:{_closed_port()}/api")
    result = _python(_READ_COMMANDS, env, json.dumps(commands))
    assert result["codes"] == {" ".join(c): 0 for c in commands}
    assert result["prefect"] == []
    assert (tmp_path / "report.html").exists()
