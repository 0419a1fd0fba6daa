"""Score a batch of captured cases with the registry's case-level metrics (pure CPU, no retries): the
batch's staged files in, its staged score tables out (content-addressed: a batch scored before with the
same settings is found, not scored again)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from raglake.columnar.batch import ColumnarBatch
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, get_metric
from raglake.pipeline.case_table import cases_table_from_columns
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.plan import score_key, scoring_token
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.scoring import score_columnar
from raglake.pipeline.staging import BatchRef, ScoredRef, find_scored, stage_scored
from raglake.tasks import engine


@dataclass(frozen=True)
class ScoreSettings:
    """What every scoring batch of a run shares; `token` (raglake.pipeline.plan.scoring_token) is
    computed once, so a batch's cache key is a hash of a few short strings."""

    versions: dict[str, str]
    config: ScoringConfig
    known_docs: frozenset[str]
    embedding: EmbeddingSpec | None
    token: str
    # the run's metrics that are not built in (a user's plugin, rubric or assertion): a Dask worker in another
    # process has not registered them, so they travel with the settings (a plugin's code by value)
    own: tuple[Metric, ...] = ()

    @classmethod
    def of(
        cls,
        versions: dict[str, str],
        config: ScoringConfig,
        known_docs: frozenset[str],
        embedding: EmbeddingSpec | None,
    ) -> ScoreSettings:
        own = tuple(m for m in map(get_metric, versions) if not m.builtin)
        return cls(versions, config, known_docs, embedding, scoring_token(versions, config, known_docs, embedding), own)

    def metrics(self) -> list[Metric]:
        """The metrics to compute, in order: the run's own as they came, the built-ins from the registry."""
        own = {m.name: m for m in self.own}
        return [own.get(name) or get_metric(name) for name in self.versions]


@engine.task(name="score-batch")
def score_cases(batch: BatchRef, settings: ScoreSettings) -> ScoredRef:
    key = score_key(batch, settings.token)
    found = find_scored(batch.results, batch.index, key)
    if found is not None:
        return found
    metrics = settings.metrics()
    embedding, store = settings.embedding, batch.store()
    with store.local(batch.cases, batch.captured()) as (cases_path, captures_path):
        columns = ColumnarBatch.from_files(cases_path, captures_path, canonical=True)  # staged: models' dumps
        case_lines, capture_lines = columns.file_lines(cases_path, captures_path)
    scored = score_columnar(
        columns,
        metrics,
        settings.config,
        known_docs=settings.known_docs,
        encoder=embedding.encoder() if embedding is not None else None,
        idf=embedding.idf if embedding is not None else None,
        judge=batch.read_judged(),
    )
    tables = scored.tables()
    tables["cases"] = cases_table_from_columns(columns, case_lines, capture_lines)
    return stage_scored(batch.results, batch.index, key, tables)


def map_scoring(
    runner: RunnerSpec, task: engine.Task, batches: list[BatchRef], settings: ScoreSettings
) -> list[ScoredRef]:
    """Run `task` over the batches on the flow's thread pool, or on Dask (engine.map_on_dask: a
    LocalCluster of `runner.workers` processes, or the scheduler at `runner.address`). Only references
    travel: the workers read and write the staged files in the results location."""
    if runner.kind == "thread":
        return _bounded(task, batches, engine.quote(settings), runner.workers)
    return engine.map_on_dask(runner, task, "batch", batches, settings=settings)


def _bounded(task: Any, batches: list[BatchRef], settings: Any, in_flight: int) -> list[ScoredRef]:
    """The batches on the flow's threads, at most `in_flight` at once: scoring is CPU work under the GIL,
    so more threads only hold more batches in memory. `settings` is quoted: Prefect does not walk it."""
    pending: deque[Any] = deque()
    done: list[ScoredRef] = []
    for batch in batches:
        if len(pending) >= in_flight:
            done.append(pending.popleft().result())
        pending.append(engine.submit(task, batch, settings))
    done.extend(future.result() for future in pending)
    return done
