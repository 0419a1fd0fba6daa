"""What `raglake.evaluate` is handed, turned into the files the normal flow reads: a DataFrame, a dict of
columns or a list of rows becomes a golden set (and, when the rows hold answers, replay captures) in a
temporary folder; a path is used as it is. Nothing of the data travels as a task parameter."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raglake.errors import ConfigError, InputError
from raglake.golden import ANSWERS, CONTEXTS, QUESTIONS, what_it_holds
from raglake.importers import (
    ALIASES,
    META_PREFIX,
    holds_capture,
    missing_question,
    near_miss,
    plain,
    split_row,
)
from raglake.pipeline.settings import name_problem
from raglake.records import Record, validate_record
from raglake.schemas import Capture, GoldenCase


@dataclass
class Inputs:
    """The files a run reads: its golden set and, when the data held answers, a replay target."""

    golden: str
    target: str | None
    folder: tempfile.TemporaryDirectory | None = None  # removed with close()
    needs_target: bool = False  # rows (or an export) of questions alone: a target must answer them

    def close(self) -> None:
        if self.folder is not None:
            self.folder.cleanup()


def rows_of(data: Any) -> list[dict[str, Any]]:
    """The rows of a DataFrame (pandas or anything with `to_dict(orient="records")`), of a dict of
    columns, or of an iterable of mappings, as plain dicts without missing values."""
    if hasattr(data, "to_dict") and hasattr(data, "columns"):
        records = data.to_dict(orient="records")
    elif isinstance(data, Mapping):  # {"question": [...], "answer": [...]}, as a Dataset.from_dict takes
        columns = {str(k): list(v) for k, v in data.items()}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ConfigError(f"the columns of the data differ in length: {sorted(lengths)}")
        records = [dict(zip(columns, values)) for values in zip(*columns.values())]
    elif isinstance(data, Iterable) and not isinstance(data, (str, bytes)):
        records = list(data)
    else:
        raise ConfigError(
            f"evaluate() takes a DataFrame, a dict of columns, a list of rows or a file path; got {type(data).__name__}"
        )
    rows = []
    for i, record in enumerate(records, start=1):
        if not isinstance(record, Mapping):
            raise InputError(f"row {i} of the data", None, None, f"expected a mapping, got {type(record).__name__}")
        rows.append({str(k): v for k, v in ((k, plain(v)) for k, v in record.items()) if v is not None})
    if not rows:
        raise ConfigError("the data has no rows")
    return rows


def _checked(model: type, data: dict[str, Any], row: int) -> Any:
    """`data` as `model`, or an InputError naming the row (1-based) and the field."""
    try:
        return validate_record(Record(row, data), model, "data")
    except InputError as e:
        raise InputError(f"row {row} of the data", None, e.field, e.message) from None


def _id(value: Any) -> Any:
    """An integer id column (a DataFrame's favourite) as text; anything else as given."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def check_name(name: object) -> str:
    """`name=` labels the run's target and data set and names its staged files: never a path."""
    problem = name_problem(name, "name") if isinstance(name, str) else f"name must be a string, got {name!r}"
    if problem:
        raise ConfigError(f"{problem} (it labels the run's target and data set)")
    return name


def _split(row: dict[str, Any], name: str, i: int) -> tuple[dict[str, Any], dict | None]:
    """A row as (golden case, capture or None); a bad `contexts` is an InputError naming the row."""
    try:
        return split_row(row, f"{name}-{i:04d}", method=name)
    except ValueError as e:  # raglake.importers: contexts that are not a list of strings
        raise InputError(f"row {i} of the data", None, "contexts", str(e)) from None


NO_ANSWERS = (
    f"holds contexts but no answer (no {' or '.join(map(repr, ALIASES['answer']))} column): add the answers your "
    f"system gave, or drop the contexts and give target= (e.g. 'http:my_service.yaml') for a system to answer the "
    f"questions"
)


def check_columns(rows: list[dict[str, Any]], extra: Sequence[str] = ()) -> None:
    """The data's columns as a whole, before any row: one that looks like a typo of a column raglake reads
    (unless in `extra` or named meta_*), no question column, or contexts without any answer."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    for column in columns:
        meant = near_miss(column, extra)
        if meant is not None:
            raise InputError(
                "the data",
                None,
                column,
                f"unknown column (did you mean {meant!r}?); to keep a column of your own in the cases' metadata, "
                f"list it in extra_columns=[...] or name it {META_PREFIX}{column}",
            )
    missing = missing_question(columns)
    if missing is not None:
        raise InputError("the data", None, "question", missing)
    if not any(name in columns for name in ALIASES["answer"]) and any(holds_capture(r) for r in rows):
        raise ConfigError(f"the data {NO_ANSWERS}")


def stage_rows(rows: list[dict[str, Any]], name: str, extra_columns: Sequence[str] = ()) -> Inputs:
    """Write the rows as `<name>.jsonl` (golden) and, when any row holds an answer or contexts,
    `<name>.captures.jsonl` (replay) in a temporary folder; the columns (check_columns), then every row,
    are checked first."""
    check_name(name)
    check_columns(rows, extra_columns)
    holds_answers = any(holds_capture(r) for r in rows)
    cases: list[GoldenCase] = []
    captures: list[Capture] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows, start=1):
        case, capture = _split(row, name, i)
        case["id"] = _id(case["id"])
        checked = _checked(GoldenCase, case, i)
        if checked.id in seen:
            first = seen[checked.id]
            raise InputError(f"row {i} of the data", None, "id", f"duplicate id {checked.id!r} (first in row {first})")
        seen[checked.id] = i
        cases.append(checked)
        if holds_answers:
            capture = capture or {"case_id": checked.id, "method": name}
            captures.append(_checked(Capture, {**capture, "case_id": checked.id}, i))
    folder = tempfile.TemporaryDirectory(prefix="raglake-input-")
    golden = Path(folder.name) / f"{name}.jsonl"
    golden.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in cases))
    target = None
    if holds_answers:
        path = Path(folder.name) / f"{name}.captures.jsonl"
        path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in captures))
        target = f"replay:{path}"
    return Inputs(str(golden), target, folder, needs_target=not holds_answers)


def file_inputs(path: str | Path) -> Inputs:
    """A golden-set file as it is; a file of another tool's shape is its own replay target too when it holds
    answers, and needs a target when it holds questions alone."""
    held = what_it_holds(path)
    if held == CONTEXTS:
        raise ConfigError(f"{path}: {NO_ANSWERS}")
    return Inputs(str(path), f"replay:{path}" if held == ANSWERS else None, needs_target=held == QUESTIONS)


def inputs_for(data: Any, golden: str | Path | None, name: str, extra_columns: Sequence[str] = ()) -> Inputs:
    """The files of an evaluation: from `data` (rows or a path) or from `golden` (a path). `extra_columns`:
    columns of the rows kept in the cases' metadata however close their names are to one raglake reads."""
    if data is not None and golden is not None:
        raise ConfigError("give the data or golden=PATH, not both")
    if isinstance(extra_columns, str):
        extra_columns = [extra_columns]
    if extra_columns and (data is None or isinstance(data, (str, Path))):
        raise ConfigError(f"extra_columns= is for rows (a DataFrame); a file's own columns are named {META_PREFIX}*")
    if data is None:
        return Inputs(str(golden), None) if golden is not None else Inputs("", None)
    if isinstance(data, (str, Path)):
        return file_inputs(data)
    return stage_rows(rows_of(data), name, extra_columns)
