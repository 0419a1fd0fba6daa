"""benchmarks/cli_scale.py's comparison of the thread and Dask runners' lakes (`make bench` runs it; CI does
not, so a break there went unseen: DuckDB 2.0 refuses `enable_progress_bar` as a connect option)."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))  # the scripts import their neighbours by plain names
try:
    import cli_scale
finally:
    sys.path.remove(str(ROOT / "benchmarks"))  # no benchmark module shadows another import afterwards


def _lake(folder: Path, values: list[float]) -> Path:
    (folder / "scores" / "run=r").mkdir(parents=True)
    table = pa.table(
        {
            "case_id": [f"c{i}" for i in range(len(values))],
            "metric": ["mrr_at_k"] * len(values),
            "value": values,
            "status": ["ok"] * len(values),
            "reason": pa.nulls(len(values), pa.string()),
        }
    )
    pq.write_table(table, folder / "scores" / "run=r" / "part-0.parquet")
    return folder


def test_same_rows_compares_the_two_lakes_score_rows(tmp_path: Path) -> None:
    a = _lake(tmp_path / "a", [0.5, 1.0, float("nan")])
    b = _lake(tmp_path / "b", [0.5, 1.0, float("nan")])
    c = _lake(tmp_path / "c", [0.5, 0.25, float("nan")])
    assert cli_scale.same_rows(a, b)
    assert not cli_scale.same_rows(a, c)


def test_the_benchmark_removes_its_work_folder_however_it_ends(tmp_path: Path, monkeypatch) -> None:
    """A 1M-case run writes gigabytes of JSONL and lakes; left in /tmp, they filled the disk CI runs on."""

    def warm_then_fail(work: Path, metrics: list[str]) -> None:
        (work / "golden.jsonl").write_text("{}\n")
        raise KeyboardInterrupt

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(cli_scale, "warm_prefect", warm_then_fail)
    with pytest.raises(KeyboardInterrupt):
        cli_scale.main(["--cases", "10"])
    assert list(tmp_path.iterdir()) == []


def test_a_kept_work_folder_stays(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli_scale, "warm_prefect", lambda work, metrics: (work / "warm").mkdir())
    monkeypatch.setattr(cli_scale, "write_data", lambda work, n: (_ for _ in ()).throw(RuntimeError("stop")))
    with pytest.raises(RuntimeError, match="stop"):
        cli_scale.main(["--cases", "10", "--keep", str(tmp_path / "kept")])
    assert (tmp_path / "kept" / "warm").is_dir()
