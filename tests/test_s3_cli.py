"""The command line with the lake and the results location in a bucket of a real S3 API (moto's server on
loopback, through s3fs): run, rescore, compare, report, metaeval (a small --data file), sql and the views
give what they give on a local lake, and the bucket holds no temp key and no half-run."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from raglake.lake.query import connect
from raglake.lake.store import Lake
from tests.conftest import FIXTURES
from tests.s3kit import MotoServer, list_keys, make_bucket, use_endpoint

pytestmark = [pytest.mark.cluster, pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

GOLDEN = "data/golden/sample.jsonl"
TARGETS = {"r-a": "replay:data/captures/basic_search.jsonl", "r-b": "replay:data/captures/local_search.jsonl"}
METRICS = "recall_any_at_k,mrr_at_k,ndcg_at_k,abstention_accuracy,answer_correctness_emb"
TINY = FIXTURES / "metaeval_tiny.jsonl"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


def _cli(*args: str) -> str:
    from typer.testing import CliRunner

    from raglake.cli import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, f"raglake {' '.join(args)}:\n{result.output}"
    return result.output


def _session(lake: str, results: str, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Every command of the session on one lake; what each gave that a local lake must give too."""
    where = ["--lake", lake]
    monkeypatch.setenv("RAGLAKE_RESULTS", results)  # rescore's (it has no --results)
    for run_id, target in TARGETS.items():
        _cli("run", "--golden", GOLDEN, "--target", target, "--run-id", run_id, "-m", METRICS, *where,
             "--results", results, "--batch-size", "20", "-q")  # fmt: skip
    _cli("rescore", "r-a", "-m", f"{METRICS},scope_miss", *where, "-q")
    compare = _cli("compare", "r-a", "r-b", *where)
    report = tmp_path / f"{name}.html"
    _cli("report", "r-b", "--against", "r-a", "-o", str(report), *where)
    _cli("metaeval", "--data", str(TINY), "-m", "answer_correctness_emb", "--metaeval-id", "m-1", "--resamples",
         "100", *where, "--results", results, "-q")  # fmt: skip
    sql = _cli("sql", "SELECT run_id, metric, round(avg(value), 6) AS v FROM scores_latest GROUP BY ALL ORDER BY ALL",
               "--json", *where)  # fmt: skip
    con = connect(Lake(lake))
    views = {
        view: con.sql(f"SELECT count(*) FROM {view}").fetchall()[0][0]
        for view in ("runs", "scores", "scores_latest", "cases", "chunks", "labels", "metaeval", "run_metrics")
    }
    scores = con.sql("SELECT run_id, case_id, metric, value, status FROM scores ORDER BY ALL").fetchall()
    return {
        "compare": compare.replace(lake, "LAKE"),
        "report": report.stat().st_size > 10_000 and "r-b" in report.read_text(encoding="utf-8"),
        "sql": sql,
        "views": views,
        "scores": [tuple("nan" if isinstance(x, float) and math.isnan(x) else x for x in row) for row in scores],
    }


def test_the_command_line_on_a_bucket_gives_what_it_gives_on_a_local_lake(
    moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from raglake.cli import render

    monkeypatch.setattr(render.console, "width", 250)
    bucket = f"cli-{uuid.uuid4().hex[:10]}"
    make_bucket(moto.url, bucket)
    use_endpoint(monkeypatch, moto.url)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    in_bucket = _session(f"s3://{bucket}/lake", f"s3://{bucket}/results", tmp_path, "bucket", monkeypatch)
    local = _session(str(tmp_path / "lake"), str(tmp_path / "results"), tmp_path, "local", monkeypatch)
    assert in_bucket["views"]["runs"] == 2 and in_bucket["views"]["metaeval"] > 0
    assert in_bucket["views"]["scores"] == 66 * (2 * 5 + 1)  # two runs of 5 metrics, and the rescore's scope_miss
    assert '"scope_miss"' in in_bucket["sql"]
    for what in ("views", "sql", "report"):
        assert in_bucket[what] == local[what], what
    assert in_bucket["scores"] == local["scores"]
    assert "r-a" in in_bucket["compare"] and in_bucket["compare"] == local["compare"]
    keys = list_keys(moto.url, bucket)
    staged = next(k for k in keys if k.startswith("results/") and k.endswith(".parquet"))  # beside the lake
    from typer.testing import CliRunner

    from raglake.cli import app

    outside = CliRunner().invoke(
        app, ["sql", f"SELECT * FROM 's3://{bucket}/{staged}'", "--lake", f"s3://{bucket}/lake"]
    )
    assert outside.exit_code != 0 and "Permission Error: Cannot access file" in str(outside.exception), outside.output
    assert any(k.startswith("results/scored/") for k in keys) and any(k.startswith("lake/metaeval/") for k in keys)
    assert not [k for k in keys if k.rsplit("/", 1)[-1].startswith(".") or k.endswith(".tmp")]
    assert not list(tmp_path.glob("raglake-*"))  # local temporary folders gone
