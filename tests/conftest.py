"""Test setup: Prefect runs against one session-wide test harness in a temporary home."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_PREFECT_TMP = tempfile.mkdtemp(prefix="raglake-prefect-")
os.environ.update(
    {
        "PREFECT_HOME": _PREFECT_TMP,
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": os.path.join(_PREFECT_TMP, "results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "100",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }
)
os.environ.pop("RAGLAKE_LAKE", None)
os.environ.pop("RAGLAKE_RESULTS", None)
# one embedding cache for the whole session (and its subprocesses): the sample is encoded once
os.environ["RAGLAKE_CACHE"] = os.path.join(_PREFECT_TMP, "raglake-cache")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test server for the whole session (about 9 s to start)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture
def lake_dir(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture(scope="session")
def readme_first_steps(tmp_path_factory):
    """The README's first steps, run once as a newcomer runs them (tests/readmekit.py): what each
    command printed and the lake they left, shared by test_readme_order.py and test_cli.py."""
    from tests.readmekit import run_first_steps

    return run_first_steps(tmp_path_factory.mktemp("readme-first-steps"))
