"""Loading golden sets (JSONL, JSON list or YAML; raglake's shape or an imported one) and label files."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from raglake.columnar.ingest import Canonical, capture_blocks, golden_blocks, worth_reading_in_bulk
from raglake.errors import InputError, did_you_mean
from raglake.importers import (
    ALIASES,
    META_PREFIX,
    holds_answer,
    holds_capture,
    missing_question,
    near_miss,
    record_shape,
    split_record,
)
from raglake.records import Record, read_records, validate_record
from raglake.schemas import Capture, CaseLabels, GoldenCase, content_text
from raglake.spool import Spool, SpoolIndex, iter_records

# a JSON or YAML capture file: a list, or an object holding `captures` (or `cases`: an export of questions and
# answers read as a golden set and as its own replay file alike)
CAPTURE_LISTS = ("captures", "cases")


@dataclass(frozen=True)
class GoldenSet:
    name: str
    path: str
    cases: Sequence[GoldenCase]  # a Spool when loaded from a file: read back from disk, slice by slice
    content_hash: str

    def ids(self) -> list[str]:
        return list(self.cases.ids) if isinstance(self.cases, Spool) else [c.id for c in self.cases]

    def has(self, case_id: str) -> bool:
        if isinstance(self.cases, Spool):
            return self.cases.position(case_id) is not None
        return any(c.id == case_id for c in self.cases)

    def by_id(self) -> dict[str, GoldenCase]:
        """Every case by id (all in memory: for small sets and tests; a run reads `cases` slice by slice)."""
        return {c.id: c for c in self.cases}


def _hash_case(h: Any, model: BaseModel) -> None:
    h.update(content_text(model.model_dump(mode="json")).encode())
    h.update(b"\n")


def content_hash(models: Iterable[BaseModel]) -> str:
    """A stable hash of validated content (field order and file format do not matter)."""
    h = hashlib.sha256()
    for m in models:
        _hash_case(h, m)
    return h.hexdigest()[:16]


def _imported(record: Record, path: Path, index: int) -> tuple[dict, dict]:
    """A generic or RAGAS record as (case, capture); a column that looks like a typo of one raglake reads is
    an InputError naming file, line and column (a column of one's own is named meta_*)."""
    if isinstance(record.data, dict):
        for column in record.data:
            meant = near_miss(str(column))
            if meant is not None:
                raise InputError(
                    str(path),
                    record.key_lines.get(column, record.line),
                    str(column),
                    f"unknown column (did you mean {meant!r}?); a column of your own: name it {META_PREFIX}{column}",
                )
    try:
        return split_record(record.data, f"{path.stem}-{index:04d}")
    except ValueError as e:
        raise InputError(str(path), record.line, "contexts", str(e)) from None


def load_golden(path: str | Path) -> GoldenSet:
    """Validate every case, a line at a time, into a Spool (memory holds ids and offsets, not cases); the
    first problem raises an InputError naming file, line and field."""
    path = Path(path)
    cases: Spool[GoldenCase] = Spool(GoldenCase, "id")
    return GoldenSet(path.stem, str(path), cases, _spool_cases(path, cases))


def _spool_cases(path: Path, cases: Spool[GoldenCase]) -> str:
    """Validate the file's cases into `cases`, in bulk a block at a time where the bulk reader vouches for
    the block (raglake.columnar.ingest), else record by record; returns their content hash."""
    h = hashlib.sha256()
    index = 0
    blocks = golden_blocks(path) if worth_reading_in_bulk(path) else iter([iter_records(path)])  # one block
    for block in blocks:
        if isinstance(block, Canonical):
            _new_keys(path, cases, "id", block.keys, block.numbers)
            cases.extend(*block.data(block.lines), block.keys, block.numbers)
            h.update(block.data(block.hashed)[0])  # each case's dump and a newline, as _hash_case adds them
            index += len(block.keys)
            continue
        for record in block:
            index += 1
            case = _golden_case(record, path, index)
            _new_keys(path, cases, "id", [case.id], [record.line])
            cases.append(case, record.line)
            _hash_case(h, case)
    if not cases:
        raise InputError(str(path), None, None, "the golden set has no cases")
    return h.hexdigest()[:16]


def _golden_case(record: Record, path: Path, index: int) -> GoldenCase:
    """A record of a golden set as a case (an imported shape converted first)."""
    if record_shape(record.data):
        if (missing := missing_question(record.data)) is not None:
            raise InputError(str(path), record.line, "question", missing)
        record = Record(record.line, _imported(record, path, index)[0], record.key_lines)
    return validate_record(record, GoldenCase, path)


_DUPLICATE = {
    "id": "duplicate id {key!r} (first used at line {first})",
    "case_id": "duplicate capture for case {key!r} (first at line {first})",
}


def _new_keys(path: Path, spool: Spool, field: str, keys: Sequence[str], numbers: Sequence[int]) -> None:
    """An InputError at the first of these records (ids `keys`, on lines `numbers`, about to be added to the
    spool) whose id the spool or an earlier one of them holds already."""
    seen: dict[str, int] = {}
    for key, number in zip(keys, numbers):
        position = spool.position(key)
        first = spool.line(position) if position is not None else seen.get(key)
        if first is not None:
            raise InputError(str(path), number, field, _DUPLICATE[field].format(key=key, first=first))
        seen[key] = number


@dataclass(frozen=True)
class SpooledGolden:
    """A golden set another process validated into a spool file the caller made: all but the records."""

    name: str
    path: str
    content_hash: str
    index: SpoolIndex

    def golden_set(self, spool: Spool[GoldenCase]) -> GoldenSet:
        """The golden set, its cases read from `spool` (the caller's, whose file was filled)."""
        spool.adopt(self.index)
        return GoldenSet(self.name, self.path, spool, self.content_hash)


def spool_golden(path: str | Path, into: int) -> SpooledGolden:
    """load_golden, its cases written to the spool file whose descriptor `into` this process inherited:
    run by another process (raglake.pipeline.inputs), which owns the file."""
    path = Path(path)
    cases: Spool[GoldenCase] = Spool(GoldenCase, "id", into=into)
    content_hash = _spool_cases(path, cases)
    return SpooledGolden(path.stem, str(path), content_hash, cases.index())


def iter_captures(path: str | Path) -> Iterator[tuple[Record, Capture]]:
    """The captures of a capture file, validated one record at a time: raglake's capture format, or a
    generic or RAGAS file (JSONL, JSON, YAML or CSV) (the shape of the first record decides)."""
    path = Path(path)
    imported: bool | None = None
    for index, record in enumerate(iter_records(path, list_key=CAPTURE_LISTS), start=1):
        if imported is None:
            imported = bool(record_shape(record.data))
        yield record, _capture(record, path, index, imported)


def _capture(record: Record, path: Path, index: int, imported: bool) -> Capture:
    if imported:
        record = Record(record.line, _imported(record, path, index)[1])
    return validate_record(record, Capture, path)


def spool_captures(path: str | Path) -> tuple[Spool[Capture], Counter[str]]:
    """A capture file's captures validated into a Spool (in bulk where the bulk reader vouches for a block, as
    _spool_cases), and how many name each method; a case captured twice is an InputError at its second line."""
    path = Path(path)
    spool: Spool[Capture] = Spool(Capture, "case_id")
    methods: Counter[str] = Counter()
    imported: bool | None = None  # the first record's shape decides the file's (iter_captures)
    if worth_reading_in_bulk(path):
        first = next(iter_records(path, list_key=CAPTURE_LISTS), None)
        imported = first is not None and bool(record_shape(first.data))
    blocks = capture_blocks(path) if imported is False else iter([iter_records(path, list_key=CAPTURE_LISTS)])
    index = 0
    answered = False  # an imported record that holds an answer (under any name) has been seen
    for block in blocks:
        if isinstance(block, Canonical):
            _new_keys(path, spool, "case_id", block.keys, block.numbers)
            spool.extend(*block.data(block.lines), block.keys, block.numbers)
            methods.update(m for m in block.methods.to_pylist() if m)
            index += len(block.keys)
            continue
        for record in block:
            index += 1
            if imported is None:
                imported = bool(record_shape(record.data))
            capture = _capture(record, path, index, imported)
            answered = answered or (imported and isinstance(record.data, dict) and holds_answer(record.data))
            _new_keys(path, spool, "case_id", [capture.case_id], [record.line])
            spool.append(capture, record.line)
            if capture.method:
                methods[capture.method] += 1
    if not spool:
        raise InputError(str(path), None, None, "the capture file is empty")
    if imported and not answered:
        raise InputError(str(path), None, "answer", NO_ANSWER_TO_REPLAY)
    return spool, methods


NO_ANSWER_TO_REPLAY = (
    f"holds no answer (no record has an {' or '.join(map(repr, ALIASES['answer']))} field), so replaying it would "
    "score every case as an empty answer: add the answers your system gave; to evaluate the retrieval alone, give each "
    'record an empty answer ("response": ""); or evaluate the file as a golden set with a target to answer its '
    "questions (--golden FILE --target ...)"
)


def load_imported_captures(path: str | Path) -> list[tuple[Record, Capture]] | None:
    """Captures held by a generic or RAGAS file (JSONL, JSON, YAML or CSV), or None when the file is not
    of such a shape."""
    path = Path(path)
    records = list(iter_records(path))
    if not records or not record_shape(records[0].data):
        return None
    out = []
    for index, record in enumerate(records, start=1):
        capture = _imported(record, path, index)[1]
        out.append((record, validate_record(Record(record.line, capture), Capture, path)))
    return out


OWN, ANSWERS, CONTEXTS, QUESTIONS = "own", "answers", "contexts", "questions"


_HELD: dict[tuple[str, int, int], str] = {}  # (file, mtime_ns, size) -> what_it_holds: a call reads it once


def what_it_holds(path: str | Path) -> str:
    """What a golden-set file holds beyond questions: OWN (raglake's golden set, or no such file: its
    first record is not another tool's shape), ANSWERS (another tool's export with at least one answer: it is
    its own replay target), CONTEXTS (retrieved contexts but no answer anywhere) or QUESTIONS (neither). Reads
    up to the first answer."""
    path = Path(path)
    if not path.is_file():
        return OWN  # a missing file is the plan's error, with its own words
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _HELD:
        if len(_HELD) >= 64:
            _HELD.clear()
        _HELD[key] = _holds(path)
    return _HELD[key]


def _holds(path: Path) -> str:
    records = iter_records(path)
    first = next(records, None)
    if first is None or not record_shape(first.data):
        return OWN
    contexts = False
    for record in itertools.chain([first], records):
        if isinstance(record.data, dict):
            if holds_answer(record.data):
                return ANSWERS
            contexts = contexts or holds_capture(record.data)
    return CONTEXTS if contexts else QUESTIONS


class _LabelLine(CaseLabels):
    case_id: str


def load_labels(path: str | Path, golden: GoldenSet) -> GoldenSet:
    """Merge an annotation file (lines of {case_id, chunks, answers}) into the golden cases' labels."""
    path = Path(path)
    merged: dict[str, CaseLabels] = {}
    for record in read_records(path, list_key="labels"):
        line = validate_record(record, _LabelLine, path)
        if not golden.has(line.case_id):
            raise InputError(
                str(path),
                record.line,
                "case_id",
                f"no case {line.case_id!r} in {golden.path}{did_you_mean(line.case_id, golden.ids())}",
            )
        base = merged.get(line.case_id) or _case(golden, line.case_id).labels or CaseLabels()
        merged[line.case_id] = CaseLabels(chunks=[*base.chunks, *line.chunks], answers=[*base.answers, *line.answers])
    cases: Spool[GoldenCase] = Spool(GoldenCase, "id")
    h = hashlib.sha256()
    for i, case in enumerate(golden.cases):
        case = case.model_copy(update={"labels": merged[case.id]}) if case.id in merged else case
        cases.append(case, golden.cases.line(i) if isinstance(golden.cases, Spool) else None)
        _hash_case(h, case)
    return GoldenSet(golden.name, golden.path, cases, h.hexdigest()[:16])


def _case(golden: GoldenSet, case_id: str) -> GoldenCase:
    """The case with this id (known to be in the set)."""
    found = golden.cases.get(case_id) if isinstance(golden.cases, Spool) else None
    return found or next(c for c in golden.cases if c.id == case_id)
