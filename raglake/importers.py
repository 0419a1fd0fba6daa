"""Importers for the evaluation-file shapes other tools write: the generic one
(`question/answer/contexts/reference`, the names most tools use) and RAGAS'
(`user_input/retrieved_contexts/response/reference`), as JSONL/JSON/YAML records, as CSV (list columns
as JSON or as Python-repr strings, which `ragas ... .to_pandas().to_csv()` writes) or as rows in memory
(`raglake.evaluate` on a DataFrame). Each record becomes a golden case plus the capture it already
holds; columns raglake has no field for are kept in the case's `metadata`, never dropped silently."""

from __future__ import annotations

import ast
import csv
import difflib
import io
import json
import math
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from raglake.errors import InputError
from raglake.records import Record
from raglake.textfiles import read_text

GENERIC = "generic"
RAGAS = "ragas"

# raglake's field, then the names other tools give it (the first one a record has wins)
ALIASES = {
    "id": ("id", "case_id", "question_id", "qid"),
    "question": ("question", "user_input", "query"),
    "reference_answer": ("reference_answer", "reference", "ground_truth", "expected_answer"),
    "answer": ("answer", "response"),
    "contexts": ("contexts", "retrieved_contexts"),
}
# golden-case and capture fields an imported record may carry under raglake's own names
CASE_FIELDS = (
    "category",
    "difficulty",
    "tags",
    "vault",
    "answerable",
    "expected_action",
    "gold_supports",
    "required_support_groups",
    "recency_conflict_rule",
    "labels",
)
CAPTURE_FIELDS = ("abstained", "references", "status", "error", "latency_ms", "folder_mode", "selected_folders")
# CSV cells that hold a list or an object (JSON or a Python literal), and those that hold a yes/no
STRUCTURED = frozenset(
    {
        "contexts",
        "retrieved_contexts",
        "reference_contexts",
        "tags",
        "gold_supports",
        "required_support_groups",
        "labels",
        "metadata",
        "references",
        "retrieved",
        "selected_folders",
        "latency_ms",
    }
)
LISTS = frozenset({"tags", "selected_folders", "reference_contexts"})  # a lone value is a list of one
BOOLEANS = frozenset({"answerable", "abstained"})
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")
KNOWN = frozenset(
    {name for names in ALIASES.values() for name in names}
    | {*CASE_FIELDS, *CAPTURE_FIELDS, "metadata", "method", "retrieved"}
)
# other columns of RAGAS' samples and test sets, kept in the case's metadata without a word (a few are close
# to a name raglake reads: retrieved_context_ids to retrieved_contexts)
PASSTHROUGH = frozenset(
    {
        "reference_contexts",
        "retrieved_context_ids",
        "reference_context_ids",
        "multi_responses",
        "rubrics",
        "synthesizer_name",
        "persona_name",
        "query_style",
        "query_length",
    }
)
# a column named so is the user's own, kept in the case's metadata under its name, however close to a known one
META_PREFIX = "meta_"
# how close (difflib's ratio, lower-cased) a column must be to a known name to be taken for a typo of it:
# retrieved_context, answers, Question, contxts, label are; context_recall (0.64), answer_relevancy (0.62) not
NEAR_MISS = 0.8


def near_miss(column: str, extra: Collection[str] = ()) -> str | None:
    """The known name `column` looks like a typo of, or None: a column raglake reads, one of RAGAS', one
    in `extra` or one starting `meta_` is never a typo, nor one that is close to no known name."""
    if column in KNOWN or column in PASSTHROUGH or column in extra or column.startswith(META_PREFIX):
        return None
    close = difflib.get_close_matches(column.lower(), sorted(KNOWN), n=1, cutoff=NEAR_MISS)
    return close[0] if close else None


def missing_question(columns: Collection[str]) -> str | None:
    """What to say when none of `columns` holds the question, or None."""
    if any(name in columns for name in ALIASES["question"]):
        return None
    first, *others = ALIASES["question"]
    return f"no question: give it as {first!r} (or {', '.join(map(repr, others))})"


def record_shape(data: Any) -> str | None:
    """Which foreign shape a record has, or None for raglake's own."""
    if not isinstance(data, dict):
        return None
    if "user_input" in data or "retrieved_contexts" in data or "response" in data:
        return RAGAS
    if "contexts" in data or ("answer" in data and "question" in data and "case_id" not in data):
        return GENERIC
    return None


def _first(data: dict[str, Any], field: str) -> Any:
    return next((data[name] for name in ALIASES[field] if data.get(name) is not None), None)


def _case_id(data: dict[str, Any], fallback: Any) -> Any:
    """The record's id as written (the case model checks its type), or the fallback when there is none."""
    value = _first(data, "id")
    return fallback if value is None or (isinstance(value, str) and value == "") else value


def _chunks(contexts: Any) -> list[dict[str, Any]]:
    if contexts is None:
        return []
    if isinstance(contexts, str):
        contexts = [contexts]
    if not isinstance(contexts, list):
        raise ValueError(f"contexts must be a list of strings, got {type(contexts).__name__}")
    for i, text in enumerate(contexts):
        if not isinstance(text, str):
            raise ValueError(f"contexts must be a list of strings, got {type(text).__name__} at contexts[{i}]")
    return [{"rank": i, "rel_path": "", "heading_path": "", "text": t} for i, t in enumerate(contexts, 1)]


def _extras(data: dict[str, Any]) -> dict[str, Any]:
    """The record's columns that no raglake field takes (another tool's scores, reference_contexts, …)."""
    return {k: v for k, v in data.items() if k not in KNOWN}


def split_record(
    data: dict[str, Any], fallback_id: str, method: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(golden-case dict, capture dict) from a generic or RAGAS record. The capture's method: the
    record's own `method`, else `method`, else the shape's name."""
    shape = record_shape(data) or GENERIC
    case_id = _case_id(data, fallback_id)
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    case: dict[str, Any] = {"id": case_id, "question": _first(data, "question")}
    case["reference_answer"] = _first(data, "reference_answer")
    case.update({key: data[key] for key in CASE_FIELDS if data.get(key) is not None})
    case["metadata"] = {**metadata, **_extras(data), "imported_from": shape}
    answer = _first(data, "answer")
    capture = {
        "case_id": case_id,
        "answer": answer if answer is not None else "",
        "method": data.get("method") or method or shape,
        **{key: data[key] for key in CAPTURE_FIELDS if data.get(key) is not None},
    }
    capture["retrieved"] = data["retrieved"] if data.get("retrieved") is not None else _chunks(_first(data, "contexts"))
    return case, capture


def holds_answer(data: dict[str, Any]) -> bool:
    """Does the record hold an answer, under any of its names?"""
    return _first(data, "answer") is not None


def holds_capture(data: dict[str, Any]) -> bool:
    """Does the record hold what a system answered (an answer or retrieved contexts, under any name)?"""
    return _first(data, "answer") is not None or _first(data, "contexts") is not None or "retrieved" in data


def split_row(data: dict[str, Any], fallback_id: str, method: str | None = None) -> tuple[dict[str, Any], dict | None]:
    """A row in memory (a DataFrame's): (golden-case dict, capture dict, or None when the row holds no
    answer and no contexts: a golden case only, for a target to answer). Any of the names in ALIASES."""
    if holds_capture(data):
        return split_record(data, fallback_id, method)
    case = {"id": _case_id(data, fallback_id), "question": _first(data, "question")}
    case["reference_answer"] = _first(data, "reference_answer")
    case.update({key: data[key] for key in CASE_FIELDS if data.get(key) is not None})
    extras = _extras(data)
    metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    if extras or metadata:
        case["metadata"] = {**metadata, **extras}
    return case, None


def plain(value: Any) -> Any:
    """A cell of a DataFrame or of numpy as plain JSON data: NaN and NA become None, arrays lists."""
    if value is None:
        return None
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # numpy arrays and scalars
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


# ---- CSV ---------------------------------------------------------------------------------------------


def csv_records(path: str | Path) -> Iterator[Record]:
    """The rows of a CSV file as records, each with the line it starts on. An empty cell is a missing
    value; list and object columns (contexts, retrieved_contexts, tags, …) hold JSON or a Python literal
    (`['a', 'b']`, what pandas writes for a list); answerable/abstained take true/false/yes/no/1/0.
    pandas' unnamed index column is ignored."""
    path = Path(path)
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if not header:
        raise InputError(str(path), 1, None, "the CSV file has no header row")
    names = [h.strip() for h in header]
    seen = [n for n in names if n and not n.startswith("Unnamed: ")]
    duplicate = next((n for n in seen if seen.count(n) > 1), None)
    if duplicate:
        raise InputError(str(path), 1, duplicate, "the column appears twice")
    line = reader.line_num + 1
    for row in reader:
        start, line = line, reader.line_num + 1
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(names):
            raise InputError(str(path), start, None, f"{len(row)} cells but {len(names)} columns in the header")
        data = {
            name: _cell(path, start, name, cell)
            for name, cell in zip(names, row)
            if name and not name.startswith("Unnamed: ") and cell.strip() != ""
        }
        yield Record(start, data)


def _cell(path: Path, line: int, name: str, cell: str) -> Any:
    """One CSV cell as a value: structured columns parsed, yes/no columns as booleans, the rest text."""
    text = cell.strip()
    if name in BOOLEANS:
        if text.lower() in _TRUE or text.lower() in _FALSE:
            return text.lower() in _TRUE
        raise InputError(str(path), line, name, f"expected true or false, got {text!r}")
    if name not in STRUCTURED:
        return cell if name in KNOWN else _number(cell)
    if text[:1] not in ("[", "{", "("):
        return [cell] if name in LISTS else cell  # one tag; a lone context is one context
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise InputError(str(path), line, name, "not a list or object (JSON or a Python literal)") from None
    return list(value) if isinstance(value, tuple) else value


def _number(cell: str) -> Any:
    """Another tool's column (a score, a count): a finite number when the cell reads as one, else the text."""
    for kind in (int, float):
        try:
            value = kind(cell)
        except ValueError:
            continue
        return value if math.isfinite(value) else cell
    return cell
