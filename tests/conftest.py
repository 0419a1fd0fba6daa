"""Test setup: Prefect runs against one session-wide test harness in a temporary home."""

from __future__ import annotations

import atexit
import fcntl
import os
import pickle
import shutil
import tempfile
from pathlib import Path

_PREFECT_TMP = tempfile.mkdtemp(prefix="raglake-prefect-")
atexit.register(shutil.rmtree, _PREFECT_TMP, True)  # the Prefect database, results and embedding cache
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
# the CLI's width on a pipe is $COLUMNS, else 120 (raglake.cli.render): the caller's $COLUMNS (pytest-xdist's
# workers get 80) would wrap long tmp paths and narrow tables in the in-process CLI tests
os.environ.pop("COLUMNS", None)
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


@pytest.fixture(autouse=True)
def registry_restored():
    """What a test registers (a user's metric, rubric, assertion or judge step) is gone after it: the registry is
    the process's, and the docs and conformance tests read all of it."""
    from raglake.metrics import registry, steps

    metrics, defined, owners = dict(registry._REGISTRY), dict(steps._DEFINED), dict(registry._OWNER)
    yield
    registry._REGISTRY.clear()
    registry._REGISTRY.update(metrics)
    registry._OWNER.clear()
    registry._OWNER.update(owners)
    steps._DEFINED.clear()
    steps._DEFINED.update(defined)


@pytest.fixture
def lake_dir(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture(scope="session")
def readme_first_steps(tmp_path_factory):
    """The README's first steps, run once as a newcomer runs them (tests/readmekit.py): what each
    command printed and the lake they left, shared by test_readme_order.py and test_cli.py. Under
    pytest-xdist (`make test` runs two workers) the first worker to ask runs them, holding a lock in the
    workers' common temporary folder, and leaves them there for the other (~75 s not spent twice)."""
    from tests.readmekit import run_first_steps

    if "PYTEST_XDIST_WORKER" not in os.environ:
        return run_first_steps(tmp_path_factory.mktemp("readme-first-steps"))
    shared = tmp_path_factory.getbasetemp().parent
    with open(shared / "readme-first-steps.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        saved = shared / "readme-first-steps.pickle"
        if saved.exists():
            return pickle.loads(saved.read_bytes())
        steps = run_first_steps(Path(tempfile.mkdtemp(prefix="readme-first-steps-", dir=shared)))
        saved.write_bytes(pickle.dumps(steps))
        return steps
