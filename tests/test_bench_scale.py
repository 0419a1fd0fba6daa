"""benchmarks/scale.py end to end on a few hundred cases (`make bench` runs it at 100k; CI does not, so a
break there would go unseen): raglake's per-case P@10, RR and nDCG@10 must agree with pytrec_eval's."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("pytrec_eval")
sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their neighbours by plain names
try:
    import scale
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def test_the_scale_benchmark_runs_and_agrees_with_pytrec_eval(capsys: pytest.CaptureFixture[str]) -> None:
    assert scale.main(["--cases", "300", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "agreement to 1e-9: OK" in out
    assert "the JSON parse floor: pyarrow's reader alone on the two files" in out
