"""A scored batch's `cases` rows built from its columns (raglake.columnar), which the scoring has read
already, instead of parsing every staged line again with json and building Python lists: at 100,000 cases
that took ~9 s of CPU, twice the scoring itself. `raglake.pipeline.rows.cases_table_from_lines` stays the
definition of the rows; tests hold the two equal."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar.batch import ColumnarBatch
from raglake.columnar.golden import Part
from raglake.columnar.lines import Lines
from raglake.columnar.normalise import mask
from raglake.lake.layouts import GOLD_SUPPORT, REFERENCE
from raglake.lake.tables import TABLES
from raglake.pipeline.rows import capture_hash, metadata_json
from raglake.schemas import LATENCY_STAGES

_CASE_COLUMNS = {  # cases column <- the golden columns' (normalised and defaulted as the model does)
    "case_id": "id",
    **{name: name for name in ("question", "reference_answer", "answerable", "category", "difficulty", "tags")},
    **{name: name for name in ("vault", "expected_action", "recency_conflict_rule")},
}
_CAPTURE_COLUMNS = {  # cases column <- the capture columns'
    "method": "method",
    "capture_status": "status",
    "capture_error": "error",
    "answer": "answer",
    "abstained": "abstained",
    "n_retrieved": "n_retrieved",
    "folder_mode": "folder_mode",
    "selected_folders": "selected_folders",
    "capture_attempts": "attempts",
    "cost_usd": "cost_usd",
    **{f"latency_{stage}_ms": f"latency_{stage}" for stage in LATENCY_STAGES},
}
_EMPTY_METADATA_LAST = ',"metadata":{}}'


def cases_table_from_columns(batch: ColumnarBatch, case_lines: Lines, capture_lines: Lines) -> pa.Table:
    """The `cases` rows of a batch read from staged files: its columns and the files' canonical lines (for
    `golden_case`, `capture_hash` and the free-form `metadata`; ColumnarBatch.file_lines), row for row."""
    n = len(batch)
    if len(case_lines) != n or len(capture_lines) != n:
        raise ValueError(f"{n} cases in columns but {len(case_lines)} case and {len(capture_lines)} capture lines")
    golden_case = case_lines.strings()
    golden, captures = batch.golden, batch.captures
    supports = golden.supports
    cols: dict[str, pa.Array | list] = {out: golden.cases.column(name) for out, name in _CASE_COLUMNS.items()}
    cols["n_gold_supports"] = pa.array(np.bincount(supports.parent, minlength=n).astype(np.int32))
    cols["gold_support_list"] = _lists(
        supports,
        n,
        GOLD_SUPPORT,
        {
            "rel_path": supports.column("rel_path"),
            "heading_path": supports.column("heading"),
            "snippets": supports.column("snippets"),
            "date": supports.column("date").cast(pa.date32()),  # ISO dates, as the model writes them
            "required": supports.column("required"),
        },
    )
    cols["metadata"] = _metadata(golden_case)
    cols.update({out: captures.captures.column(name) for out, name in _CAPTURE_COLUMNS.items()})
    references = captures.references
    cols["reference_list"] = _lists(
        references,
        n,
        REFERENCE,
        {"rel_path": references.column("rel_path"), "heading_path": references.column("heading")},
    )
    cols["capture_hash"] = _hashes(capture_lines)
    cols["golden_case"] = golden_case
    schema = TABLES["cases"].schema
    return pa.Table.from_arrays([_typed(cols[f.name], f.type) for f in schema], schema=schema)


def _lists(part: Part, n: int, item: pa.StructType, fields: dict[str, pa.Array]) -> pa.Array:
    """A list column of `item` structs from a Part (its rows by case, in each case's order)."""
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(part.parent, minlength=n), out=offsets[1:])
    values = pa.StructArray.from_arrays([_typed(fields[f.name], f.type) for f in item], fields=list(item))
    return pa.ListArray.from_arrays(pa.array(offsets), values, type=pa.list_(item))


def _metadata(golden_case: pa.Array) -> pa.Array:
    """Each case's metadata as `json.dumps` writes it (what cases_table_from_lines stores). A canonical line
    ends with its metadata: one ending `,"metadata":{}}` holds the empty object (that quote after a comma
    opens a key: in valid JSON it cannot close a string), so only the others are parsed."""
    empty = mask(pc.ends_with(golden_case, _EMPTY_METADATA_LAST))
    out = np.full(len(golden_case), "{}", dtype=object)
    rows = np.flatnonzero(~empty)
    if len(rows):
        lines = golden_case.take(pa.array(rows)).to_pylist()
        out[rows] = [metadata_json(json.loads(line)["metadata"]) for line in lines]
    return pa.array(out, pa.string())


def _hashes(capture_lines: Lines) -> list[str]:
    """rows.capture_hash of each capture line, hashed from slices of the buffer."""
    data = memoryview(capture_lines.data)
    starts, ends = capture_lines.spans()
    return [capture_hash(data[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]


def _typed(values: pa.Array | pa.ChunkedArray | list, type_: pa.DataType) -> pa.Array:
    if isinstance(values, list):
        return pa.array(values, type=type_)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values if values.type == type_ else values.cast(type_)
