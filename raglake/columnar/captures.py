"""Captures as columns: one row per capture, plus its retrieved chunks (sorted by rank, as the model
sorts them) and references as flat tables that name their capture's row. Read in bulk and checked
against the same rules as raglake.schemas.Capture; a file the bulk path cannot vouch for is read
record by record."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar import normalise as norm
from raglake.columnar.arrays import combine, flat
from raglake.columnar.golden import Part, anchors
from raglake.columnar.lines import Lines, check_nulls, from_dumps, read_lines, read_table
from raglake.columnar.normalise import BulkProblem
from raglake.columnar.schema import capture_schema
from raglake.records import read_records, validate_record
from raglake.schemas import CANONICAL, CAPTURE_STATUSES, FOLDER_MODES, LATENCY_STAGES, Capture
from raglake.schemas import _choice as choice

CAPTURE_FIELDS = ("case_id", "answer", "abstained", "method", "status", "error", "folder_mode", "selected_folders")
CAPTURE_FIELDS += ("attempts", "cost_usd")


@dataclass
class CaptureColumns:
    lines: Lines
    captures: pa.Table  # CAPTURE_FIELDS and latency_<stage>, normalised and defaulted (status derived)
    chunks: Part  # rank, rel_path, heading, depth, text, score, chunk_id; by capture, then rank
    references: Part  # rel_path, heading, depth
    models: list[Capture] | None = field(default=None, repr=False)
    canonical: bool = False  # the lines are models' dumps (read without normalising): validated with CANONICAL

    def __len__(self) -> int:
        return self.captures.num_rows

    def model(self, row: int) -> Capture:
        if self.models is not None:
            return self.models[row]
        context = CANONICAL if self.canonical else None
        return Capture.model_validate(json.loads(self.lines.line(row)), context=context)  # as validate_record does


def read_capture_columns(path: str | Path, *, canonical: bool = False) -> CaptureColumns:
    """A JSONL file of captures in raglake's shape as columns; an invalid one raises the per-record path's
    InputError (file, line, field). `canonical`: models' dumps (staged captures), taken as they are."""
    try:
        lines = read_lines(path, limit=not canonical)
        return capture_columns(read_table(lines, capture_schema), lines, normalise=not canonical)
    except BulkProblem:
        records, context = read_records(path, limit=not canonical), CANONICAL if canonical else None
        models = [validate_record(r, Capture, path, context) for r in records]
        return captures_from_models(str(path), models, [r.line for r in records])


def captures_from_models(path: str, models: list[Capture], numbers: list[int] | None = None) -> CaptureColumns:
    """Columns of validated models (their values are taken as they are)."""
    dumps = [m.model_dump_json().encode() for m in models]
    lines = from_dumps(path, dumps, numbers or range(1, len(models) + 1))
    cols = capture_columns(read_table(lines, capture_schema), lines, normalise=False)
    cols.models = models
    return cols


def capture_columns(table: pa.Table, lines: Lines, *, normalise: bool = True) -> CaptureColumns:
    n = table.num_rows
    nulls = np.zeros(n, dtype=bool)
    cols = {name: combine(table.column(name)) for name in CAPTURE_FIELDS}
    if cols["case_id"].null_count or norm.blank(cols["case_id"]).any():
        raise BulkProblem("case_id missing or blank")
    for name in ("status", "selected_folders"):
        nulls |= norm.mask(pc.is_null(cols[name]))
    cols["answer"] = pc.fill_null(cols["answer"], "")
    cols["selected_folders"] = pc.fill_null(cols["selected_folders"], pa.scalar([], pa.list_(pa.string())))
    if pc.list_flatten(cols["selected_folders"]).null_count:
        raise BulkProblem("a null selected folder")
    status = pc.fill_null(cols["status"], "ok")
    if not norm.mask(pc.is_in(status, pa.array(CAPTURE_STATUSES))).all():
        raise BulkProblem("unknown status")
    empty = norm.mask(pc.equal(status, "ok")) & norm.blank(cols["answer"]) & ~norm.mask(cols["abstained"])
    cols["status"] = pc.if_else(pa.array(empty), pa.scalar("empty"), status)
    if normalise:
        cols["folder_mode"] = norm.choices(cols["folder_mode"], lambda v: choice(v, FOLDER_MODES, "folder_mode"))
    attempts = cols["attempts"]
    if not norm.mask(pc.fill_null(pc.greater_equal(attempts, 1), True)).all():
        raise BulkProblem("attempts below 1")
    if not _finite_from_zero(cols["cost_usd"]):
        raise BulkProblem("cost_usd below 0 or not finite")
    latency = combine(table.column("latency_ms"))
    nulls |= norm.mask(pc.is_null(latency))
    for stage in LATENCY_STAGES:
        values = pc.if_else(pc.is_valid(latency), latency.field(stage), pa.scalar(None, pa.float64()))
        if not _finite_from_zero(values):
            raise BulkProblem(f"latency {stage} below 0 or not finite")
        cols[f"latency_{stage}"] = values
    chunks = _chunks(table.column("retrieved"), n, nulls, normalise)
    references = _references(table.column("references"), n, nulls, normalise)
    cols["n_retrieved"] = pa.array(np.bincount(chunks.parent, minlength=n).astype(np.int32))
    check_nulls(lines, nulls)
    return CaptureColumns(lines, pa.table(cols), chunks, references, canonical=not normalise)


def _finite_from_zero(values: pa.Array) -> bool:
    """Every value that is not null is finite and at least 0."""
    return bool(norm.mask(pc.fill_null(pc.and_(pc.greater_equal(values, 0), pc.is_finite(values)), True)).all())


def _chunks(col: pa.ChunkedArray, n: int, nulls: np.ndarray, normalise: bool) -> Part:
    nulls |= norm.mask(pc.is_null(combine(col)))
    parent, _, values = flat(col, n)
    rank = values.field("rank")
    if rank.null_count or not norm.mask(pc.greater_equal(rank, 1)).all():
        raise BulkProblem("a rank missing or below 1")
    nulls[parent[norm.mask(pc.is_null(values.chunked("text")))]] = True
    ranks = np.asarray(rank, dtype=np.int64)
    order = np.lexsort((ranks, parent))
    if len(order) and ((np.diff(parent[order]) == 0) & (np.diff(ranks[order]) == 0)).any():
        raise BulkProblem("a duplicate rank")  # the per-record path names it
    score = values.field("score")
    if not norm.mask(pc.fill_null(pc.is_finite(score), True)).all():
        raise BulkProblem("a score is NaN or infinite")  # pyarrow's reader takes NaN for a number
    cols = anchors(values, normalise)
    text = values.chunked("text")
    cols.update(rank=rank, text=pc.fill_null(text, "") if text.null_count else text, score=score)
    cols["chunk_id"] = values.field("chunk_id")
    table = pa.table(cols)
    if (np.diff(order) != 1).any():
        table, parent = table.take(pa.array(order)), parent[order]
    counts_ = np.bincount(parent, minlength=n)
    index = (np.arange(len(parent)) - (np.cumsum(counts_) - counts_)[parent]).astype(np.int32)
    return Part(parent, index, table)


def _references(col: pa.ChunkedArray, n: int, nulls: np.ndarray, normalise: bool) -> Part:
    nulls |= norm.mask(pc.is_null(combine(col)))
    parent, index, values = flat(col, n)
    return Part(parent, index, pa.table(anchors(values, normalise)))
