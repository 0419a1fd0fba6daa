"""benchmarks/cold_start.py end to end at its smallest (`make bench` runs it in full; CI does not, so a break
there would go unseen): one cold raglake process on 20 cases and one warm-mode process, ragas left out by
option. Its children start their own temporary Prefect server (that start-up is what the benchmark
measures), in a Prefect home inside the benchmark's work folder, which must be gone afterwards. No timing
is asserted: only that the figures are printed and nothing is left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

# the session's Prefect home and results location (tests/conftest.py) and a harness' API would replace the
# benchmark's own temporary home and server
PREFECT_OF_THE_SESSION = ("PREFECT_HOME", "PREFECT_RESULTS_LOCAL_STORAGE_PATH", "PREFECT_API_URL")


def test_the_cold_start_benchmark_prints_its_figures_and_leaves_nothing(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in PREFECT_OF_THE_SESSION} | {"TMPDIR": str(tmp)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "cold_start.py"), "--quick", "--no-busy", "--no-ragas"],
        cwd=tmp_path,  # from any folder
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert done.returncode == 0, (out + done.stderr)[-3000:]
    assert f"PREFECT_HOME {tmp}" in out  # the children's Prefect home: the benchmark's own, under $TMPDIR
    assert "ragas not installed: skipped (--no-ragas)" in out
    assert re.search(r"cold 20 cases, raglake +wall best +\d+\.\d\d s", out)
    assert re.search(r"evaluate\(\) returned at \d+\.\d\d s \(the run's suite \d+\.\d\d s: .*embedding", out)
    assert re.search(r"a warm call on fresh rows \d+\.\d\d / \d+\.\d\d s", out)
    assert re.search(r"first calls: \d+\.\d\d s \(in a new, empty PREFECT_HOME", out)
    assert re.search(r"fixed start-up: cold 20-case process wall \d+\.\d\d s - a warm call \d+\.\d\d s", out)
    assert re.search(r"a warm call's fixed cost .*: \d+\.\d\d s .*goal <= 0.3 s: (met|NOT met)", out)
    assert "cold 20 cases, raglake / ragas, calm: no ragas figure" in out
    assert "one core busy: not measured (--no-busy)" in out
    assert "one core busy: load" not in out
    assert sorted(p.name for p in tmp.iterdir()) == []  # rows, lakes, caches and the Prefect home: all removed
