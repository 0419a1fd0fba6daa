"""The one scoring pipeline both flows run: embed every distinct text once → judge (when a judge is
configured and a metric needs it) → score in batches. `evaluate` feeds it the staged batches of fresh
captures and the selected metrics; `rescore` feeds it a stored run's captures, staged the same way, and
the metrics that changed. Only references travel between tasks (raglake.pipeline.staging)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from raglake import progress
from raglake.judge.config import JudgeConfig
from raglake.judge.stage import SpotSample, wanted_steps
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, metric_versions
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.finish import JudgeSummary
from raglake.pipeline.judging import JUDGE_RUNS
from raglake.pipeline.plan import embedding_spec
from raglake.pipeline.runners import RunnerSpec
from raglake.pipeline.staging import BatchRef, ScoredRef
from raglake.schemas import GoldenCase
from raglake.tasks import engine
from raglake.tasks.embed import embed_texts
from raglake.tasks.judge import JudgeWork, judge_cases
from raglake.tasks.score import ScoreSettings, map_scoring, score_cases


@dataclass
class ScoreWork:
    """What the stages read: one run's staged batches, the metrics to compute and how."""

    run_id: str
    lake_url: str
    batches: list[BatchRef]
    cases: list[GoldenCase]  # for the run-level idf of BERTScore (reference answers) only
    metrics: list[Metric]
    config: ScoringConfig
    known_docs: frozenset[str]
    embedder: str | None
    judge: JudgeConfig | None = None
    spot_check: JudgeConfig | None = None
    spot_sample: SpotSample | None = None
    device: str = "auto"


@dataclass
class Scored:
    """The stages' result: references to the scored batches and what the run's figures and record need."""

    scored: list[ScoredRef]
    embedding: EmbeddingSpec | None = None
    embedding_stats: dict[str, float] | None = None
    judged: JudgeSummary | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # embedding, judge, scoring

    @property
    def n_scores(self) -> int:
        return sum(r.n_scores for r in self.scored)


def score_stage(work: ScoreWork, runner: RunnerSpec) -> Scored:
    """embed → judge → score for one run."""
    t0 = time.perf_counter()
    embedding = embedding_spec(work.metrics, work.embedder, work.lake_url, work.config, work.cases, work.device)
    stats = None
    if embedding is not None:  # every distinct text once, before the batches read them
        names = [m.name for m in work.metrics]
        stats = engine.call(embed_texts, engine.quote(embedding), work.batches, work.config.k, names)
    t_embedded = time.perf_counter()

    versions = metric_versions(work.metrics)
    batches, judged = work.batches, None
    if work.judge is not None and wanted_steps(work.metrics):
        judge_work = JudgeWork(
            versions, work.config, work.judge, work.lake_url, work.run_id, embedding, work.spot_check, work.spot_sample
        )
        try:
            batches, judge_stats = engine.call(judge_cases, engine.quote(judge_work), batches)
            judged = JudgeSummary({}, judge_stats)
        finally:  # the run's judging is done: its ledger flushed, its budget freed
            JUDGE_RUNS.close(work.lake_url, work.run_id)
    t_judged = time.perf_counter()

    settings = ScoreSettings.of(versions, work.config, work.known_docs, embedding)
    progress.start("scoring", sum(b.n for b in batches), "cases")
    scored = []
    for ref in map_scoring(runner, score_cases, batches, settings):
        scored.append(ref)
        progress.advance("scoring", ref.n_cases)
    seconds = {"embedding": t_embedded - t0, "judge": t_judged - t_embedded, "scoring": time.perf_counter() - t_judged}
    if stats is not None:  # of the embedding stage, the model's own work (the rest: its load, the reading)
        seconds["embedding_encode"] = stats["seconds"]
    return Scored(scored, embedding, stats, judged, seconds)
