"""The per-case scoring path, kept as the tests' independent reference: each (case, capture) pair scored on
its pydantic models (raglake.pipeline.scoring.score_context, one CaseContext per case), its rows appended
to column lists, and a run landed from those rows held in memory.

raglake itself scores a batch over its columns (raglake.pipeline.scoring.score_columnar / score_files, what
tasks/score.py runs) and lands the staged parts (raglake.pipeline.rows.land_staged_run). The tests hold
those equal to this path, row for row (tests/test_columnar_scoring.py, test_long_lines.py,
test_case_table.py, test_staging.py), and use it where a hand-built pair or a small lake is the shortest
way to a value. benchmarks/retrieval.py times it beside the columnar path."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

import pyarrow as pa

from raglake.anchors import heading_string
from raglake.embed.encoders import default_encoder
from raglake.lake.landing import land_run
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric, RunValue, Score, get_metric
from raglake.pipeline.embedding import needs_embedder, prepare_embeddings
from raglake.pipeline.rows import (
    RunRecord,
    cases_table_from_lines,
    metrics_table,
    run_metric_defs,
    run_metrics_table,
    with_scoring_id,
)
from raglake.pipeline.scoring import CHUNK_COLUMNS, ScoredBatch, _add_labels, _add_sentences, score_context
from raglake.pipeline.staging import jsonl
from raglake.schemas import Capture, GoldenCase

# ---------------------------------------------------------------------------------------------- scoring


def score_one(
    case: GoldenCase,
    capture: Capture,
    metric: str,
    *,
    k: int = 5,
    require_snippets: bool = False,
    encoder: Any = None,
    **settings: Any,
) -> Score:
    """One metric for one case; embedding metrics use `encoder`, or the default embedder without a disk
    cache."""
    metrics = [get_metric(metric)]
    config = ScoringConfig(k=k, require_snippets=require_snippets, **settings)
    if encoder is None and needs_embedder(metrics):
        encoder = default_encoder()
    embeddings = prepare_embeddings([(case, capture)], metrics, config, encoder)
    ctx = CaseContext(case, capture, config, embeddings=embeddings)
    return score_context(ctx, metrics)[0][1]


def score_batch(
    pairs: Iterable[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    *,
    known_docs: frozenset[str] = frozenset(),
    encoder: Any = None,
    idf: dict[int, float] | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """Scores (one row per case × metric, case-major), labels and chunks of a batch of (case, capture)
    pairs, case by case: what score_columnar gives over the same batch, with the same arguments.

    `encoder` (a raglake.embed.cache.TextEncoder) is needed when embedding metrics are among `metrics`;
    `judge` holds the judge stage's outcomes (case id -> step name -> StepOutcome), None when no judge is
    configured."""
    pairs = list(pairs)
    embeddings = prepare_embeddings(pairs, metrics, config, encoder, idf)
    batch = ScoredBatch()
    for case, capture in pairs:
        ctx = CaseContext(
            case,
            capture,
            config,
            known_docs=known_docs,
            embeddings=embeddings,
            judge=None if judge is None else judge.get(case.id, {}),
        )
        scored = score_context(ctx, metrics)
        _add_scores(batch.scores, case.id, scored)
        for metric, score in scored:
            _add_sentences(batch.sentence_scores, case.id, metric, score.detail)
        _add_labels(batch.labels, ctx)
        _add_chunks(batch.chunks, ctx)
    return batch


def _add_scores(out: dict[str, list[Any]], case_id: str, scored: list[tuple[Metric, Score]]) -> None:
    for metric, score in scored:
        out["case_id"].append(case_id)
        out["metric"].append(metric.name)
        out["value"].append(score.value)
        out["status"].append(score.status)
        out["reason"].append(score.reason)
        out["metric_version"].append(metric.version)
        out["label_source"].append(score.source)
        out["embedder"].append(score.model)
        out["judge_model"].append(score.judge_model)
        out["prompt_id"].append(score.prompt_id)
        out["prompt_version"].append(score.prompt_version)
        out["judge_call"].append(score.judge_call)


def _add_chunks(out: dict[str, list[Any]], ctx: CaseContext) -> None:
    for chunk, matched in zip(ctx.capture.retrieved, ctx.chunk_matches):
        values = (
            ctx.case.id,
            chunk.rank,
            chunk.rel_path,
            heading_string(chunk.heading_path),
            chunk.text,
            chunk.score,
            chunk.chunk_id,
            chunk.rank <= ctx.k,
            sorted(matched),
        )
        for col, value in zip(CHUNK_COLUMNS, values):
            out[col].append(value)


# ---------------------------------------------------------------------------------------------- landing


def cases_table(cases: Sequence[GoldenCase], captures: Sequence[Capture]) -> pa.Table:
    """One `cases` row per case, from the models: the golden case and its capture."""
    return cases_table_from_lines(jsonl(cases), jsonl(captures))


def scores_table(scored: ScoredBatch, scoring_id: str, scored_at: dt.datetime) -> pa.Table:
    """The batch's score rows under one scoring (its id and time on every row)."""
    cols = dict(scored.scores)
    n = len(cols["case_id"])
    cols["scoring_id"] = [scoring_id] * n
    cols["scored_at"] = [scored_at] * n
    cols["is_latest"] = [True] * n  # the newest when written, as raglake.pipeline.rows.with_scoring says
    return to_arrow(TABLES["scores"], cols)


def run_tables(
    run: RunRecord,
    cases: Sequence[GoldenCase],
    captures: Sequence[Capture],
    scored: ScoredBatch,
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> dict[str, pa.Table]:
    """Every run-partitioned table's rows for one run."""
    tables = {
        "cases": cases_table(cases, captures),
        "chunks": to_arrow(TABLES["chunks"], scored.chunks),
        "labels": to_arrow(TABLES["labels"], scored.labels),
        "scores": scores_table(scored, scoring_id, run.finished_at),
        "sentence_scores": with_scoring_id(scored.tables()["sentence_scores"], scoring_id),
        "run_metrics": run_metrics_table(run_values, run.metric_versions),
        "metrics": metrics_table(run_metric_defs(run), scoring_id, run.finished_at),
    }
    if coverage:
        tables["coverage"] = to_arrow(TABLES["coverage"], coverage)
    return tables


def land_scored_run(
    lake: Lake,
    run: RunRecord,
    cases: Sequence[GoldenCase],
    captures: Sequence[Capture],
    scored: ScoredBatch,
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> None:
    """Build the run's rows in memory and land them (raglake.lake.landing.land_run: the runs row last),
    as raglake.pipeline.rows.land_staged_run lands the staged parts of the same rows."""
    tables = run_tables(run, cases, captures, scored, run_values, scoring_id, coverage)
    stems = {"scores": scoring_id, "sentence_scores": scoring_id, "metrics": scoring_id}
    land_run(lake, run.run_id, run.started_at.date(), tables, run.table(), stems=stems)
