"""The one scoring pipeline both flows run: embed every distinct text once → judge (when a judge is
configured and a metric needs it) → score in batches. `evaluate` feeds it fresh captures and the
selected metrics; `rescore` feeds it a stored run's captures and the metrics that changed."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import unmapped
from prefect.filesystems import RemoteFileSystem

from raglake import progress
from raglake.embed.texts import collect_texts
from raglake.judge.config import JudgeConfig
from raglake.judge.stage import wanted_steps
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, metric_versions
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.finish import JudgeSummary
from raglake.pipeline.judging import JUDGE_RUNS
from raglake.pipeline.plan import embedding_spec
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.scoring import ScoredBatch
from raglake.schemas import Capture, GoldenCase
from raglake.tasks.embed import embed_texts
from raglake.tasks.judge import judge_cases
from raglake.tasks.score import map_scoring, score_cases


@dataclass
class ScoreWork:
    """What the stages read: one run's cases and captures, the metrics to compute and how."""

    run_id: str
    lake_url: str
    cases: list[GoldenCase]
    captures: list[Capture]
    metrics: list[Metric]
    config: ScoringConfig
    known_docs: frozenset[str]
    embedder: str | None
    batch_size: int
    judge: JudgeConfig | None = None
    spot_check: JudgeConfig | None = None
    spot_ids: frozenset[str] = frozenset()

    def batches(self) -> list[tuple[list[GoldenCase], list[Capture]]]:
        n = self.batch_size
        return [(self.cases[i : i + n], self.captures[i : i + n]) for i in range(0, len(self.cases), n)]


@dataclass
class Scored:
    """The stages' result: the score rows and what the run's figures and record need."""

    scored: ScoredBatch
    embedding: EmbeddingSpec | None = None
    embedding_stats: dict[str, float] | None = None
    judged: JudgeSummary | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # embedding, judge, scoring


def result_storage(results: str) -> Any:
    """Prefect's result storage for a results location: a local folder, or any fsspec URL
    (s3://bucket/results, gs://…, memory://…) through Prefect's RemoteFileSystem."""
    if "://" in results and not results.startswith("file://"):
        # Prefect wants remote result storage saved as a block: one per location, named by its hash
        basepath = results.rstrip("/")
        block = RemoteFileSystem(basepath=basepath)
        block.save(f"raglake-results-{hashlib.sha256(basepath.encode()).hexdigest()[:12]}", overwrite=True)
        return block
    return Path(results.removeprefix("file://"))


def score_stage(work: ScoreWork, runner: RunnerSpec, storage: Any) -> Scored:
    """embed → judge → score for one run; `storage`: Prefect's result storage of the scoring tasks."""
    t0 = time.perf_counter()
    embedding = embedding_spec(work.metrics, work.embedder, work.lake_url, work.config, work.cases)
    stats = None
    if embedding is not None:  # every distinct text once, before the batches read them
        stats = embed_texts(embedding, collect_texts(zip(work.cases, work.captures), work.config.k))
    t_embedded = time.perf_counter()

    versions = metric_versions(work.metrics)
    judged = None
    if work.judge is not None and wanted_steps(work.metrics):  # one task: one gateway, one set of limits
        try:
            judged = JudgeSummary.of(
                judge_cases(
                    work.cases,
                    work.captures,
                    versions,
                    work.config,
                    work.judge,
                    work.lake_url,
                    work.run_id,
                    embedding,
                    work.spot_check,
                    work.spot_ids,
                )
            )
        finally:  # the run's judging is done: its ledger flushed, its budget freed
            JUDGE_RUNS.close(work.lake_url, work.run_id)
    t_judged = time.perf_counter()

    batches = work.batches()
    scored = ScoredBatch()
    progress.start("scoring", len(work.cases), "cases")
    for part in map_scoring(
        runner,
        score_cases.with_options(result_storage=storage),
        dict(
            cases=[cases for cases, _ in batches],
            captures=[captures for _, captures in batches],
            versions=unmapped(versions),
            config=unmapped(work.config),
            known_docs=unmapped(work.known_docs),
            embedding=unmapped(embedding),
            judge=[judged.for_cases([c.id for c in cases]) if judged else None for cases, _ in batches],
        ),
    ):
        scored.extend(part)
        progress.advance("scoring", len(set(part.scores["case_id"])))
    seconds = {"embedding": t_embedded - t0, "judge": t_judged - t_embedded, "scoring": time.perf_counter() - t_judged}
    return Scored(scored, embedding, stats, judged, seconds)
