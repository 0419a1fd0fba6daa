"""Golden cases as columns: one row per case, plus its gold supports, required support groups and
human labels as flat tables that name their case's row. Read in bulk and checked against the same
rules as raglake.schemas.GoldenCase; a file the bulk path cannot vouch for is read record by record."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import TypeAdapter

from raglake.columnar import normalise as norm
from raglake.columnar.arrays import combine, counts, flat
from raglake.columnar.lines import Lines, check_nulls, from_dumps, read_lines, read_table
from raglake.columnar.normalise import BulkProblem
from raglake.columnar.schema import GOLDEN_FREE_FORM, golden_schema
from raglake.records import read_records, validate_record
from raglake.schemas import (
    ACTIONS,
    ANSWER_LABELS,
    CANONICAL,
    CATEGORIES,
    CHUNK_LABELS,
    DIFFICULTIES,
    RECENCY_RULES,
    GoldenCase,
)
from raglake.schemas import _choice as choice

_DATE = TypeAdapter(dt.date)
_CHOICES = {
    "category": (CATEGORIES, "category"),
    "difficulty": (DIFFICULTIES, "difficulty"),
    "expected_action": (ACTIONS, "expected_action"),
    "recency_conflict_rule": (RECENCY_RULES, "recency_conflict_rule"),
}
CASE_FIELDS = ("id", "question", "reference_answer", "answerable", "category", "difficulty", "tags", "vault")
CASE_FIELDS += ("expected_action", "recency_conflict_rule")


@dataclass
class Part:
    """Elements of a list field, flat: the case row each belongs to, its index there, and its fields."""

    parent: np.ndarray
    index: np.ndarray
    table: pa.Table
    _columns: dict[str, pa.Array] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.parent)

    def column(self, name: str) -> pa.Array:
        if name not in self._columns:
            self._columns[name] = combine(self.table.column(name))
        return self._columns[name]


@dataclass
class GoldenColumns:
    lines: Lines
    cases: pa.Table  # CASE_FIELDS, normalised and defaulted
    supports: Part  # rel_path, heading (normal string), depth, snippets, date (ISO), required
    groups: Part  # one row per member of a required support group: group, support
    n_groups: np.ndarray
    chunk_labels: Part  # rel_path, heading, depth and the chunk labels (null where not given)
    answer_labels: Part  # method, answer_sha256 and the answer labels
    annotated: np.ndarray  # the case carries human labels of any kind
    models: list[GoldenCase] | None = field(default=None, repr=False)
    canonical: bool = False  # the lines are models' dumps (read without normalising): validated with CANONICAL

    def __len__(self) -> int:
        return self.cases.num_rows

    def model(self, row: int) -> GoldenCase:
        if self.models is not None:
            return self.models[row]
        context = CANONICAL if self.canonical else None
        return GoldenCase.model_validate(json.loads(self.lines.line(row)), context=context)  # as validate_record does


def read_golden_columns(path: str | Path, *, canonical: bool = False) -> GoldenColumns:
    """A JSONL golden set in raglake's shape as columns; an invalid one raises the per-record path's
    InputError (file, line, field). `canonical`: the file holds models' dumps (a staged batch), whose values
    are taken as they are: normalising a normal value again can change it."""
    try:
        lines = read_lines(path, limit=not canonical)
        return golden_columns(read_table(lines, golden_schema, GOLDEN_FREE_FORM), lines, normalise=not canonical)
    except BulkProblem:
        return golden_from_models(str(path), *_validated(path, canonical))


def _validated(path: str | Path, canonical: bool = False) -> tuple[list[GoldenCase], list[int]]:
    records, context = read_records(path, limit=not canonical), CANONICAL if canonical else None
    return [validate_record(r, GoldenCase, path, context) for r in records], [r.line for r in records]


def golden_from_models(path: str, models: list[GoldenCase], numbers: list[int] | None = None) -> GoldenColumns:
    """Columns of validated models (their values are taken as they are)."""
    dumps = [m.model_dump_json(exclude={"metadata", "assertions"}).encode() for m in models]
    lines = from_dumps(path, dumps, numbers or range(1, len(models) + 1))
    cols = golden_columns(read_table(lines, golden_schema), lines, normalise=False)
    cols.models = models
    return cols


def golden_columns(table: pa.Table, lines: Lines, *, normalise: bool = True) -> GoldenColumns:
    n = table.num_rows
    nulls = np.zeros(n, dtype=bool)
    cases = _case_table(table, nulls, normalise)
    supports = _supports(table.column("gold_supports"), n, nulls, normalise)
    groups, n_groups = _groups(table.column("required_support_groups"), counts(supports.parent, n), n, nulls)
    rule = combine(cases.column("recency_conflict_rule"))
    dated = np.bincount(supports.parent[norm.mask(pc.is_valid(supports.column("date")))], minlength=n) > 0
    if (norm.mask(pc.equal(rule, "cite_newer")) & ~dated).any():
        raise BulkProblem("cite_newer without dated supports")
    chunk_labels, answer_labels, annotated = _labels(table.column("labels"), n, nulls, normalise)
    if normalise and ("assert" in table.column_names or "assertions" in table.column_names):
        raise BulkProblem("a case's own assertions: validated record by record (an error names the line)")
    if "metadata" in table.column_names:
        meta = table.column("metadata")
        if not (pa.types.is_struct(meta.type) or pa.types.is_null(meta.type)):
            raise BulkProblem("metadata is not an object")
        nulls |= norm.mask(pc.is_null(combine(meta)))
    check_nulls(lines, nulls)
    columns = (lines, cases, supports, groups, n_groups, chunk_labels, answer_labels, annotated)
    return GoldenColumns(*columns, canonical=not normalise)


def _case_table(table: pa.Table, nulls: np.ndarray, normalise: bool) -> pa.Table:
    ids, question = combine(table.column("id")), combine(table.column("question"))
    if ids.null_count or question.null_count:
        raise BulkProblem("id or question missing")
    if norm.blank(ids).any() or (np.asarray(pc.utf8_length(question)) == 0).any():
        raise BulkProblem("blank id or empty question")
    answerable = combine(table.column("answerable"))
    nulls |= norm.mask(pc.is_null(answerable))
    answerable = pc.fill_null(answerable, True)
    cols = {name: combine(table.column(name)) for name in CASE_FIELDS}
    cols["answerable"] = answerable
    if normalise:
        for name, (options, kind) in _CHOICES.items():
            cols[name] = norm.choices(cols[name], lambda v, o=options, k=kind: choice(v, o, k))
    cols["expected_action"] = pc.coalesce(
        cols["expected_action"], pc.if_else(answerable, pa.scalar("answer"), pa.scalar("refuse"))
    )
    nulls |= norm.mask(pc.is_null(cols["tags"]))
    cols["tags"] = pc.fill_null(cols["tags"], pa.scalar([], pa.list_(pa.string())))
    _distinct_tags(cols["tags"], len(ids))
    return pa.table(cols)


def _distinct_tags(tags: pa.Array, n: int) -> None:
    parent, _, values = flat(tags, n)
    if len(values):
        codes = np.asarray(pc.dictionary_encode(values).indices, dtype=np.int64)
        keys = parent * (int(codes.max()) + 1) + codes
        if len(np.unique(keys)) != len(keys):
            raise BulkProblem("a tag repeated in one case")  # the model keeps the first: the per-record path


def anchors(values: pa.StructArray, normalise: bool) -> dict[str, pa.Array]:
    """rel_path, heading (its normal string) and depth of a flat array of anchors; without `normalise`, the
    values are a model's dump (canonical) and are taken as they are."""
    rel = values.field("rel_path")
    if rel.null_count:
        raise BulkProblem("rel_path missing")
    heading, depth = norm.headings_and_depth(values.field("heading_path"), canonical=not normalise)
    return {"rel_path": norm.rel_paths(rel) if normalise else rel, "heading": heading, "depth": pa.array(depth)}


def _supports(col: pa.ChunkedArray, n: int, nulls: np.ndarray, normalise: bool) -> Part:
    parent, index, values = flat(col, n)
    nulls |= norm.mask(pc.is_null(combine(col)))
    cols = anchors(values, normalise)
    snippets, required, date = values.field("snippets"), values.field("required"), values.field("date")
    if pc.list_flatten(snippets).null_count:
        raise BulkProblem("a null snippet")
    nulls[parent[norm.mask(pc.is_null(snippets)) | norm.mask(pc.is_null(required))]] = True
    if normalise:
        date = norm.map_unique(
            date, norm.mask(pc.is_valid(date)), lambda v: _DATE.validate_python(v).isoformat(), pa.string()
        )
    cols.update(snippets=pc.fill_null(snippets, pa.scalar([], pa.list_(pa.string()))), date=date)
    cols["required"] = pc.fill_null(required, False)
    return Part(parent, index, pa.table(cols))


def _iso_date(value: str) -> str:
    return _DATE.validate_python(value).isoformat()


def _groups(col: pa.ChunkedArray, n_supports: np.ndarray, n: int, nulls: np.ndarray) -> tuple[Part, np.ndarray]:
    nulls |= norm.mask(pc.is_null(combine(col)))
    case_of_group, group_index, groups = flat(col, n)
    member_group, _, members = flat(groups, len(groups))
    if (np.asarray(pc.list_value_length(groups)) == 0).any():
        raise BulkProblem("an empty required support group")
    support = np.asarray(members, dtype=np.int64)
    parent = case_of_group[member_group]
    if ((support < 0) | (support >= n_supports[parent])).any():
        raise BulkProblem("a required support group names a missing support")
    table = pa.table({"group": pa.array(group_index[member_group]), "support": pa.array(support.astype(np.int32))})
    return Part(parent, np.zeros(len(parent), np.int32), table), counts(case_of_group, n)


def _binary(values: pa.StructArray, names: tuple[str, ...]) -> dict[str, pa.Array]:
    out = {}
    for name in names:
        col = values.field(name)
        if not norm.mask(pc.fill_null(pc.and_(pc.greater_equal(col, 0), pc.less_equal(col, 1)), True)).all():
            raise BulkProblem(f"{name} is not 0 or 1")
        out[name] = col.cast(pa.int8())
    return out


def _labels(col: pa.ChunkedArray, n: int, nulls: np.ndarray, normalise: bool) -> tuple[Part, Part, np.ndarray]:
    labels = combine(col)
    given = norm.mask(pc.is_valid(labels))
    chunks, answers = labels.field("chunks"), labels.field("answers")
    nulls |= given & (norm.mask(pc.is_null(chunks)) | norm.mask(pc.is_null(answers)))
    c_parent, c_index, c_values = flat(pc.if_else(pa.array(given), chunks, pa.nulls(n, chunks.type)), n)
    a_parent, a_index, a_values = flat(pc.if_else(pa.array(given), answers, pa.nulls(n, answers.type)), n)
    chunk_cols = {**anchors(c_values, normalise), **_binary(c_values, CHUNK_LABELS)}
    sha = a_values.field("answer_sha256")
    ok_sha = pc.and_(pc.greater_equal(pc.utf8_length(sha), 8), pc.match_substring_regex(sha, "^[0-9a-f]+$"))
    if not norm.mask(pc.fill_null(ok_sha, True)).all():
        raise BulkProblem("answer_sha256 is not a hex prefix of 8 or more")
    answer_cols = {"method": a_values.field("method"), "answer_sha256": sha, **_binary(a_values, ANSWER_LABELS)}
    annotated = (counts(c_parent, n) + counts(a_parent, n)) > 0
    return Part(c_parent, c_index, pa.table(chunk_cols)), Part(a_parent, a_index, pa.table(answer_cols)), annotated
