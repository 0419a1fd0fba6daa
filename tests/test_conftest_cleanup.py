"""The test session's own temporary folders go when it ends (they had piled up in /tmp across runs, with
the benchmarks' leftovers, until a CI run found the disk full)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_a_test_session_removes_its_prefect_home(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    env.pop("PYTEST_XDIST_WORKER", None)
    (tmp_path / "tmp").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         f"--basetemp={tmp_path / 'basetemp'}", "tests/test_bench_cli_scale.py::test_a_kept_work_folder_stays"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == []
