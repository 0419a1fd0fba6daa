"""`--runner dask`: scoring batches run in the worker processes of a 2-worker Dask LocalCluster
(prefect-dask) and land exactly the scores the thread runner lands."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from raglake.errors import ConfigError
from raglake.lake.query import connect
from raglake.lake.store import Lake
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.settings import RunSettings

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

GOLDEN = "data/golden/sample.jsonl"
TARGET = "replay:data/captures/local_search.jsonl"
# deterministic and embedding metrics: the workers read the vectors the flow's embedding stage cached
METRICS = [
    "recall_any_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "scope_miss",
    "attribution_hit",
    "abstention_accuracy",
    "context_relevance",
    "answer_correctness_emb",
    "answer_hallucination",
]


def _scores(lake: str) -> dict[tuple[str, str], tuple]:
    rows = (
        connect(Lake(lake))
        .sql("SELECT case_id, metric, value, status, reason, metric_version, embedder FROM scores")
        .fetchall()
    )
    return {(c, m): ("nan" if v is not None and math.isnan(v) else v, s, r, ver, e) for c, m, v, s, r, ver, e in rows}


def test_dask_local_cluster_lands_the_same_scores_as_threads(tmp_path: Path) -> None:
    from raglake.flows.evaluate import evaluate

    runs = {}
    for runner in ("thread", "dask"):
        lake, results = str(tmp_path / runner / "lake"), tmp_path / runner / "results"
        evaluate(
            RunSettings(
                golden=GOLDEN,
                target=TARGET,
                lake=lake,
                metrics=METRICS,
                batch_size=20,
                results=str(results),
                runner=runner,
            )
        )
        runs[runner] = _scores(lake)
        # each runner computed its batches itself (own result store): no cache hit from the other run
        assert any(results.rglob("*")), f"the {runner} runner persisted no task results"
    assert len(runs["thread"]) == 66 * len(METRICS)
    assert runs["dask"].keys() == runs["thread"].keys()
    for key, (value, *rest) in runs["thread"].items():
        other, *other_rest = runs["dask"][key]
        assert other_rest == rest, key  # status, reason, versions, embedder: exactly
        # values exactly, but for float32 rounding: a worker process runs BLAS with one thread (Dask sets
        # OMP_NUM_THREADS=1), so sums of embedding products may differ in the last bit (seen: 7e-8)
        assert other == value or (isinstance(value, float) and other == pytest.approx(value, rel=1e-6, abs=1e-7)), key
    assert any(v[1] == "ok" and v[0] != "nan" for (c, m), v in runs["dask"].items() if m == "context_relevance")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("thread", RunnerSpec("thread")),
        (None, RunnerSpec("thread")),
        ("dask", RunnerSpec("dask")),
        ("dask:tcp://10.0.0.5:8786", RunnerSpec("dask", "tcp://10.0.0.5:8786")),
    ],
)
def test_runner_specs_parse(spec, expected) -> None:
    assert RunnerSpec.parse(spec) == expected


def test_a_misspelled_runner_is_refused_with_a_suggestion() -> None:
    with pytest.raises(ConfigError, match="did you mean 'dask'"):
        RunnerSpec.parse("dsak")
    with pytest.raises(ConfigError, match="no address"):
        RunnerSpec.parse("thread:tcp://x:1")


def test_lake_and_result_store_on_fsspec_urls(tmp_path: Path) -> None:
    """What a cluster shares: the lake and Prefect's result store given as URLs (memory:// here,
    s3:// in production) instead of local folders; a repeat run reads its batches back from there."""
    from raglake.flows.evaluate import evaluate

    lake, results = "memory://raglake-url-test/lake", "memory://raglake-url-test/results"
    first = evaluate(
        RunSettings(golden=GOLDEN, target=TARGET, lake=lake, metrics=METRICS[:3], batch_size=30, results=results)
    )
    rows = (
        connect(Lake(lake))
        .sql("SELECT count(*), count(DISTINCT metric) FROM scores WHERE run_id = $r", params={"r": first})
        .fetchall()
    )
    assert rows == [(66 * 3, 3)]
    import fsspec

    stored = fsspec.filesystem("memory").find("/raglake-url-test/results")
    assert stored, "no task result landed in the memory:// result store"
    second = evaluate(
        RunSettings(golden=GOLDEN, target=TARGET, lake=lake, metrics=METRICS[:3], batch_size=30, results=results)
    )
    assert (
        second != first
        and _scores(lake)
        and len(fsspec.filesystem("memory").find("/raglake-url-test/results")) == len(stored)
    )


def test_dask_workers_get_the_api_url_from_the_cluster_not_from_this_process(monkeypatch) -> None:
    """The flow's Prefect API reaches the worker processes through the cluster's worker env; nothing
    writes the flow process's own os.environ."""
    import os

    import prefect_dask

    from raglake.tasks.on_prefect import PREFECT_TASKS  # noqa: F401 - the Dask mapping is Prefect's
    from raglake.tasks.score import map_scoring, score_cases

    seen: dict = {}

    class FakeRunner:
        def __init__(self, cluster_kwargs: dict) -> None:
            seen["kwargs"] = cluster_kwargs

        def __enter__(self):  # noqa: ANN204
            seen["env_inside"] = dict(os.environ)
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def map(self, task, parameters):  # noqa: ANN001, ANN201
            return []

    monkeypatch.setattr(prefect_dask, "DaskTaskRunner", FakeRunner)
    before = dict(os.environ)
    assert map_scoring(RunnerSpec("dask", workers=2), score_cases, [], None) == []
    assert seen["env_inside"] == before == dict(os.environ)
    assert seen["kwargs"]["env"]["PREFECT_API_URL"].startswith("http")
