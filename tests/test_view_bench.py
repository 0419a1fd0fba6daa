"""benchmarks/view.py on a tiny synthetic lake (CI does not run the benchmark, so a break there would go
unseen): benchmarks/lake_data.py builds a lake of the current layout, and every page the benchmark times
answers 200 on it."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their neighbours by plain names
try:
    import view as view_bench
    from lake_data import build_lake, pick_metrics
finally:
    sys.path.remove(str(ROOT / "benchmarks"))


def test_the_synthetic_lake_holds_gold_supports_in_the_current_layout(tmp_path):
    from raglake.pipeline.lakes import open_lake

    build_lake(tmp_path / "lake", 2, 20, pick_metrics(3), seed=0)
    q = open_lake(tmp_path / "lake")
    supports = q.con.sql("SELECT sum(len(gold_support_list)), count(*) FROM cases").fetchall()[0]
    assert supports[1] == 40 and supports[0] > 0
    assert q.con.sql("SELECT count(*) FROM cases WHERE reference_list IS NULL").fetchall()[0][0] == 0


def test_the_view_benchmark_times_every_page(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    view_bench.main(["--runs", "8", "--cases", "30", "--metrics", "4", "--repeat", "1", "--keep", str(tmp_path)])
    out = capsys.readouterr().out
    pages = ("Runs", "Run", "Worst cases", "Compare", "Case", "Judge call", "Metrics", "Meta-evaluation", "SQL as CSV")
    for page in pages:
        assert f"\n{page} " in out, out
    assert "load average (1, 5, 15 min) before:" in out
