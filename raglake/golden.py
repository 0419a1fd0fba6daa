"""Loading golden sets (JSONL, JSON list or YAML; raglake's shape or an imported one) and label files."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from raglake.errors import InputError, did_you_mean
from raglake.importers import record_shape, split_record
from raglake.records import Record, read_records, validate_record
from raglake.schemas import Capture, CaseLabels, GoldenCase


@dataclass(frozen=True)
class GoldenSet:
    name: str
    path: str
    cases: list[GoldenCase]
    content_hash: str

    def by_id(self) -> dict[str, GoldenCase]:
        return {c.id: c for c in self.cases}


def content_hash(models: list[BaseModel]) -> str:
    """A stable hash of validated content (field order and file format do not matter)."""
    h = hashlib.sha256()
    for m in models:
        h.update(json.dumps(m.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


def _imported(record: Record, path: Path, index: int) -> tuple[dict, dict]:
    try:
        return split_record(record.data, f"{path.stem}-{index:04d}")
    except ValueError as e:
        raise InputError(str(path), record.line, "contexts", str(e)) from None


def load_golden(path: str | Path) -> GoldenSet:
    """Validate every case; the first problem raises an InputError naming file, line and field."""
    path = Path(path)
    records = read_records(path)
    if not records:
        raise InputError(str(path), None, None, "the golden set has no cases")
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    for index, record in enumerate(records, start=1):
        if record_shape(record.data):
            record = Record(record.line, _imported(record, path, index)[0], record.key_lines)
        case = validate_record(record, GoldenCase, path)
        if case.id in first_line:
            raise InputError(
                str(path), record.line, "id", f"duplicate id {case.id!r} (first used at line {first_line[case.id]})"
            )
        first_line[case.id] = record.line
        cases.append(case)
    return GoldenSet(path.stem, str(path), cases, content_hash(cases))


def load_imported_captures(path: str | Path) -> list[tuple[Record, Capture]] | None:
    """Captures held by a seed-003/RAGAS file, or None when the file is not of such a shape."""
    path = Path(path)
    records = read_records(path)
    if not records or not record_shape(records[0].data):
        return None
    out = []
    for index, record in enumerate(records, start=1):
        capture = _imported(record, path, index)[1]
        out.append((record, validate_record(Record(record.line, capture), Capture, path)))
    return out


class _LabelLine(CaseLabels):
    case_id: str


def load_labels(path: str | Path, golden: GoldenSet) -> GoldenSet:
    """Merge an annotation file (lines of {case_id, chunks, answers}) into the golden cases' labels."""
    path = Path(path)
    known = golden.by_id()
    merged: dict[str, CaseLabels] = {}
    for record in read_records(path, list_key="labels"):
        line = validate_record(record, _LabelLine, path)
        if line.case_id not in known:
            raise InputError(
                str(path),
                record.line,
                "case_id",
                f"no case {line.case_id!r} in {golden.path}{did_you_mean(line.case_id, known)}",
            )
        base = merged.get(line.case_id) or known[line.case_id].labels or CaseLabels()
        merged[line.case_id] = CaseLabels(chunks=[*base.chunks, *line.chunks], answers=[*base.answers, *line.answers])
    cases = [c.model_copy(update={"labels": merged[c.id]}) if c.id in merged else c for c in golden.cases]
    return GoldenSet(golden.name, golden.path, cases, content_hash(cases))
