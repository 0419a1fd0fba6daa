"""benchmarks/same_input.py end to end on 300 cases (issue 29's like-for-like figures; `make bench` runs it at
200k, CI does not): pytrec_eval on raglake's own JSONL, `raglake run` as a child process (auto: in process at
this size, no Prefect server) and the library path, each asked for P@10, RR and nDCG@10; every figure named
in the report, and raglake's per-case values equal to pytrec_eval's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytest.importorskip("pytrec_eval")
sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their neighbours by plain names
try:
    import same_input
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def test_the_same_input_benchmark_runs_and_agrees_with_pytrec_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    assert same_input.main(["--cases", "300", "--orchestration", "auto", "--keep", str(work)]) == 0
    out = capsys.readouterr().out
    for figure in (
        "load before:",
        "load after:",
        "pytrec_eval on the same JSONL",
        "evaluator and means alone",
        "library path (3 metrics, staged Parquet)",
        "raglake run --orchestration auto",
        "in process, no Prefect server: auto <= 2,000 cases",  # auto ran in process at this size
        "suite_seconds",
        "CLI --orchestration auto / pytrec_eval on the same JSONL:",
        "library path / pytrec_eval on the same JSONL:",
        "largest process's peak RSS:",
        "the CLI (raglake run)",
        "raglake run again, same target and lake",  # the second run: its summary compares two runs
        "its summary compares two 300-case runs",
    ):
        assert figure in out, figure
    assert "agreement to 1e-9: OK" in out
    for row in ("library path", "CLI (auto)"):  # values compared on every case pytrec_eval scores, none missing
        compared, one_side = re.search(rf"^{re.escape(row)} .*?\s([\d,]+), ([\d,]+)$", out, re.M).groups()
        assert int(compared.replace(",", "")) > 250 and one_side == "0", row
    assert (work / "lake-auto-0" / "scores").is_dir()  # the CLI's own lake, read back for the agreement
    assert "against the previous run" in (work / "cli-again.log").read_text()  # the second run compared
