"""Score a batch of captured cases with the registry's case-level metrics (pure CPU, no retries)."""

from __future__ import annotations

from typing import Any

from prefect import get_client, task

from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.plan import score_key
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.scoring import ScoredBatch, score_batch
from raglake.schemas import Capture, GoldenCase


@task(
    name="score-batch",
    persist_result=True,
    cache_key_fn=lambda ctx, p: score_key(
        p["cases"], p["captures"], p["versions"], p["config"], p["known_docs"], p["embedding"], p["judge"]
    ),
)
def score_cases(
    cases: list[GoldenCase],
    captures: list[Capture],
    versions: dict[str, str],
    config: ScoringConfig,
    known_docs: frozenset[str],
    embedding: EmbeddingSpec | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """`judge`: the judge stage's outcomes for these cases (None: no judge configured)."""
    metrics = [get_metric(name) for name in versions]
    encoder = embedding.encoder() if embedding is not None else None
    idf = embedding.idf if embedding is not None else None
    return score_batch(
        zip(cases, captures), metrics, config, known_docs=known_docs, encoder=encoder, idf=idf, judge=judge
    )


def map_scoring(runner: RunnerSpec, task: Any, parameters: dict[str, Any]) -> list[ScoredBatch]:
    """Run `task` mapped over `parameters` on the flow's thread pool, or on Dask (prefect-dask): a
    LocalCluster of `runner.workers` processes, or the scheduler at `runner.address`."""
    if runner.kind == "thread":
        return list(task.map(**parameters).result())
    from prefect_dask import DaskTaskRunner

    if runner.address:
        dask = DaskTaskRunner(address=runner.address)
    else:
        dask = DaskTaskRunner(
            cluster_kwargs={
                "n_workers": runner.workers,
                "threads_per_worker": 1,
                "processes": True,
                "dashboard_address": None,
                "env": worker_env(),
            }
        )
    with dask:
        return [future.result() for future in dask.map(task, parameters)]


def worker_env() -> dict[str, str]:
    """The environment of the Dask worker processes a flow starts: they report to this flow's Prefect
    API (the ephemeral server included) instead of each starting a server of its own. Handed to the
    cluster (each worker's Nanny sets it in its own process); this process's environment is left alone."""
    with get_client(sync_client=True) as client:
        return {"PREFECT_API_URL": str(client.api_url)}
