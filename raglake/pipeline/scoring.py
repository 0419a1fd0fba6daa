"""Scoring a batch of cases with the registry's case-level metrics: long rows of scores, the
labels each case carried (every source) and the retrieved chunks with the supports they match.

A batch is scored over its columns (score_columnar; score_files reads two JSONL files into them), what
the score task runs. The tests keep a per-case path over pydantic models as the reference this one is
held equal to, row for row (tests/rowpath.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from raglake.columnar.batch import ColumnarBatch
from raglake.lake.tables import TABLES, TableSpec, to_arrow
from raglake.metrics.columnar import OK, BatchContext, Column
from raglake.metrics.columnar_rows import chunk_arrays, label_arrays, score_arrays
from raglake.metrics.context import CaseContext, Label, ScoringConfig
from raglake.metrics.registry import Metric, Score, SentenceScore
from raglake.pipeline.embedding import batch_vectors, prepare_embeddings
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, Capture, GoldenCase

# the lake's schemas are the one definition of these columns; landing adds a scoring's id, time and
# is_latest flag to scores
SCORING_COLUMNS = ("scoring_id", "scored_at", "is_latest")
SCORE_COLUMNS = tuple(n for n in TABLES["scores"].schema.names if n not in SCORING_COLUMNS)
LABEL_COLUMNS = tuple(TABLES["labels"].schema.names)
CHUNK_COLUMNS = tuple(TABLES["chunks"].schema.names)
SENTENCE_COLUMNS = tuple(n for n in TABLES["sentence_scores"].schema.names if n != "scoring_id")


# the scores table as a batch produces it: the lake's schema less the columns landing adds
STAGED_SCORES = TableSpec(
    "scores",
    TABLES["scores"].partition,
    TABLES["scores"].partition_type,
    pa.schema([f for f in TABLES["scores"].schema if f.name not in SCORING_COLUMNS]),
)


# per-sentence scores as a batch produces them: landing adds the scoring's id
STAGED_SENTENCES = TableSpec(
    "sentence_scores",
    TABLES["sentence_scores"].partition,
    TABLES["sentence_scores"].partition_type,
    pa.schema([f for f in TABLES["sentence_scores"].schema if f.name != "scoring_id"]),
)

_TABLES = {
    "scores": STAGED_SCORES,
    "labels": TABLES["labels"],
    "chunks": TABLES["chunks"],
    "sentence_scores": STAGED_SENTENCES,
}


def _columns(names: Sequence[str]) -> dict[str, list[Any]]:
    return {c: [] for c in names}


class ScoredBatch:
    """A batch's scores, labels and chunks: column lists (the tests' per-case path) or Arrow tables (the columnar
    path); either reads as the other."""

    def __init__(
        self,
        scores: dict[str, list[Any]] | None = None,
        labels: dict[str, list[Any]] | None = None,
        chunks: dict[str, list[Any]] | None = None,
        *,
        tables: dict[str, pa.Table] | None = None,
    ):
        self._tables = dict(tables) if tables is not None else None
        self._lists: dict[str, dict[str, list[Any]]] | None = None
        if tables is None:
            self._lists = {
                "scores": scores if scores is not None else _columns(SCORE_COLUMNS),
                "labels": labels if labels is not None else _columns(LABEL_COLUMNS),
                "chunks": chunks if chunks is not None else _columns(CHUNK_COLUMNS),
                "sentence_scores": _columns(SENTENCE_COLUMNS),
            }

    def _as_lists(self) -> dict[str, dict[str, list[Any]]]:
        if self._lists is None:
            self._lists = {kind: table.to_pydict() for kind, table in (self._tables or {}).items()}
            self._tables = None
        return self._lists

    @property
    def scores(self) -> dict[str, list[Any]]:
        return self._as_lists()["scores"]

    @property
    def labels(self) -> dict[str, list[Any]]:
        return self._as_lists()["labels"]

    @property
    def chunks(self) -> dict[str, list[Any]]:
        return self._as_lists()["chunks"]

    @property
    def sentence_scores(self) -> dict[str, list[Any]]:
        return self._as_lists()["sentence_scores"]

    def extend(self, other: ScoredBatch) -> None:
        if self._tables is not None and other._tables is not None:
            self._tables = {k: pa.concat_tables([t, other._tables[k]]) for k, t in self._tables.items()}
            return
        mine, theirs = self._as_lists(), other._as_lists()
        for kind, columns in theirs.items():
            for name, values in columns.items():
                mine[kind][name].extend(values)

    def tables(self) -> dict[str, pa.Table]:
        """The batch as Arrow tables of the lake's schemas; scores without `scoring_id` and `scored_at`
        (landing adds them)."""
        if self._tables is not None:
            return dict(self._tables)
        return {kind: to_arrow(spec, self._as_lists()[kind]) for kind, spec in _TABLES.items()}


def precondition(metric: Metric, case: GoldenCase, capture: Capture) -> Score | None:
    """The `undefined` score every metric shares: failed capture, or a case the metric does not apply to."""
    if capture.failed:
        return Score.undefined("capture_failed")
    if metric.applies_to == "answerable" and not case.answerable:
        return Score.undefined("not_answerable")
    if metric.applies_to == "unanswerable" and case.answerable:
        return Score.undefined("answerable")
    return None


def score_context(ctx: CaseContext, metrics: Sequence[Metric]) -> list[tuple[Metric, Score]]:
    return [(m, precondition(m, ctx.case, ctx.capture) or m.fn(ctx)) for m in metrics]


def _add_sentences(out: dict[str, list[Any]], case_id: str, metric: Metric, detail: Sequence[SentenceScore]) -> None:
    """The per-sentence scores some metrics return with their value (Score.detail)."""
    for d in detail:
        row = (case_id, metric.name, metric.version, d.index, d.sentence, d.value)
        for col, value in zip(SENTENCE_COLUMNS, (*row, d.flagged, d.best_cos, d.coverage, d.best_rank)):
            out[col].append(value)


def _add_labels(out: dict[str, list[Any]], ctx: CaseContext) -> None:
    def row(level: str, rank: int | None, name: str, label: Label) -> None:
        for col, value in zip(LABEL_COLUMNS, (ctx.case.id, level, rank, name, label.value, label.source)):
            out[col].append(value)

    for chunk, lab, judged in zip(ctx.top, ctx.chunk_labels, ctx.judge_chunk_labels):
        for name in CHUNK_LABELS:
            if lab is not None and getattr(lab, name) is not None:
                row("chunk", chunk.rank, name, Label(getattr(lab, name), "human"))
            if judged is not None and judged.get(name) is not None:
                row("chunk", chunk.rank, name, Label(int(judged[name]), judged["source"]))
    if ctx.capture.failed:
        return
    for source in (ctx.human_answer_labels, ctx.judge_labels, ctx.rule_answer_labels):
        for name in ANSWER_LABELS:
            if name in source:
                row("answer", None, name, source[name])


def score_files(
    cases_path: str,
    captures_path: str,
    metrics: Sequence[Metric],
    config: ScoringConfig,
    *,
    known_docs: frozenset[str] = frozenset(),
    encoder: Any = None,
    idf: dict[int, float] | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """A batch given as two JSONL files in raglake's shape (one golden case and one capture a line, same
    order, same length), read and scored in columns (score_columnar)."""
    batch = ColumnarBatch.from_files(cases_path, captures_path)
    return score_columnar(batch, metrics, config, known_docs=known_docs, encoder=encoder, idf=idf, judge=judge)


def score_columnar(
    batch: ColumnarBatch,
    metrics: Sequence[Metric],
    config: ScoringConfig,
    *,
    known_docs: frozenset[str] = frozenset(),
    encoder: Any = None,
    idf: dict[int, float] | None = None,
    judge: dict[str, dict[str, Any]] | None = None,
) -> ScoredBatch:
    """A batch's scores (one row per case × metric, case-major), labels and chunks, computed over its
    columns (the rows tests/rowpath.py's per-case score_batch gives): a metric with a vectorised form
    (Metric.columnar; one that reads a judge step only when no judge is configured) scores every case at
    once; the others, and the rows a form leaves to its metric, run per case on models built for them."""
    bc = BatchContext(batch, config, known_docs=known_docs, judge=judge)
    bc.encoder = encoder
    per_case = [m for m in metrics if not _vectorised(m, judge)]
    # the vector forms leave some rows to their functions: those read the batch's vector table too
    wanting = per_case + [m for m in metrics if m.texts and m not in per_case]
    if per_case:
        bc.embeddings = prepare_embeddings(batch.pairs(), wanting, config, encoder, idf)
    elif wanting:  # made only if such a row comes, from the columns
        bc.embeddings_when_asked(lambda: batch_vectors(batch, wanting, config, encoder))
    sentences = _columns(SENTENCE_COLUMNS)
    columns = [_metric_column(bc, m, judge, sentences) for m in metrics]
    return ScoredBatch(
        tables={
            "scores": _table(STAGED_SCORES, score_arrays(batch.case_ids, metrics, columns)),
            "labels": _table(TABLES["labels"], label_arrays(bc)) if judge is None else _per_case_labels(bc),
            "chunks": _table(TABLES["chunks"], chunk_arrays(bc)),
            "sentence_scores": to_arrow(STAGED_SENTENCES, sentences),
        }
    )


def _vectorised(metric: Metric, judge: dict[str, Any] | None) -> bool:
    return metric.columnar is not None and (judge is None or not metric.steps)


def _metric_column(
    bc: BatchContext, metric: Metric, judge: dict[str, Any] | None, sentences: dict[str, list[Any]]
) -> Column:
    if _vectorised(metric, judge):
        col = metric.columnar(bc)
    else:
        col = Column(bc.n)
        col.defer(np.ones(bc.n, dtype=bool))
    failed = bc.failed
    col.undefined(failed, "capture_failed")
    col.deferred[failed] = False
    if metric.applies_to != "all":
        other = ~failed & (~bc.answerable if metric.applies_to == "answerable" else bc.answerable)
        col.undefined(other, "not_answerable" if metric.applies_to == "answerable" else "answerable")
        col.deferred[other] = False
    for row in np.flatnonzero(col.deferred).tolist():
        col.score(row, metric.fn(bc.context(row)))
    if col.details:  # per-sentence scores, in case order, of the rows still scored
        ids = bc.cached("case_ids", lambda: bc.batch.case_ids.to_pylist())
        for row in sorted(col.details):
            if col.status[row] == OK:
                _add_sentences(sentences, ids[row], metric, col.details[row])
    return col


def _per_case_labels(bc: BatchContext) -> pa.Table:
    out = _columns(LABEL_COLUMNS)
    for row in range(bc.n):
        _add_labels(out, bc.context(row))
    return to_arrow(TABLES["labels"], out)


def _table(spec: TableSpec, arrays: dict[str, Any]) -> pa.Table:
    return pa.Table.from_arrays([arrays[f.name].cast(f.type) for f in spec.schema], schema=spec.schema)
