"""Records of any length up to the documented limit (raglake.textfiles.MAX_RECORD_BYTES, one JSONL line) are
read and scored, in bulk and per record; a longer line is an InputError naming the file and the line
(issue 25, item 6: a JSON line over ~8 MiB made pyarrow's reader fail with "straddling object straddles
two block boundaries" and scoring crashed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from raglake import textfiles
from raglake.columnar.batch import ColumnarBatch
from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import all_metrics
from raglake.pipeline.scoring import score_columnar, score_files
from raglake.records import read_records, validate_record
from raglake.schemas import Capture
from raglake.spool import iter_records
from raglake.textfiles import iter_lines
from tests.conftest import FIXTURES, ROOT
from tests.rowpath import score_batch
from tests.test_columnar_scoring import assert_same_tables

READS_ANSWER = [m for m in all_metrics("case") if "answer" in m.inputs and m.family in ("label", "abstention")]
BIG = 10 * 1000 * 1000  # a 10 MB answer: its line is longer than pyarrow's 8 MiB that broke


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines() if line]


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _files(tmp_path: Path, *, answer: int = BIG, reference: int = 0, surrogate: bool = False) -> tuple[str, str]:
    """The mini golden set and its captures, case c2's answer `answer` characters long (and its reference
    `reference`); `surrogate`: another capture holds a \\u escape of a surrogate pair and an escaped backslash,
    which may hide a lone surrogate from the bulk reader's check: the file goes to the per-record path."""
    golden, captures = _rows("mini_golden.jsonl"), _rows("mini_captures.jsonl")
    captures[1]["answer"] = ("Auth is a blocker [1]. " * (answer // 23 + 1))[:answer]
    if reference:
        golden[1]["reference_answer"] = ("Auth and billing. " * (reference // 18 + 1))[:reference]
    if surrogate:
        captures[2]["answer"] = "\ud83d\ude00 I could not find this in the notes (C:\\notes)."
    cases = _write(tmp_path / "golden.jsonl", golden)
    path = tmp_path / "captures.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in captures), encoding="utf-8")  # ensure_ascii: \ud83d
    return cases, str(path)


def _per_case(cases: str, captures: str) -> dict:
    golden = load_golden(cases)
    found = {c.case_id: c for c in (validate_record(r, Capture, captures) for r in read_records(captures))}
    return score_batch([(c, found[c.id]) for c in golden.cases], READS_ANSWER, ScoringConfig()).tables()


@pytest.mark.parametrize("surrogate", [False, True], ids=["bulk", "per-record"])
def test_a_10_mb_answer_is_scored_in_columns(tmp_path: Path, surrogate: bool) -> None:
    cases, captures = _files(tmp_path, reference=9 * 1000 * 1000, surrogate=surrogate)
    assert max(len(line) for line in Path(captures).read_bytes().split(b"\n")) > 8 << 20
    batch = ColumnarBatch.from_files(cases, captures)
    assert (batch.captures.models is not None) == surrogate  # the per-record path, then bulk over its dumps
    answers = batch.captures.captures.column("answer").to_pylist()
    assert len(answers[1]) == BIG and answers[1].startswith("Auth is a blocker [1].")
    tables = score_files(cases, captures, READS_ANSWER, ScoringConfig()).tables()
    assert_same_tables(tables, _per_case(cases, captures))
    scored = [r for r in tables["scores"].to_pylist() if r["case_id"] == "c2"]
    assert {r["metric"] for r in scored} == {m.name for m in READS_ANSWER}


def test_staged_dumps_with_a_long_line_are_read_back(tmp_path: Path) -> None:
    """The run scores its staged batches (models' dumps, canonical=True): the same bulk reader."""
    cases, captures = _files(tmp_path)
    golden = load_golden(cases).cases
    models = [validate_record(r, Capture, captures) for r in read_records(captures)]
    staged_cases = tmp_path / "staged_cases.jsonl"
    staged_cases.write_text("".join(c.model_dump_json() + "\n" for c in golden), encoding="utf-8")
    staged = tmp_path / "staged_captures.jsonl"
    staged.write_text("".join(m.model_dump_json() + "\n" for m in models), encoding="utf-8")
    batch = ColumnarBatch.from_files(staged_cases, staged, canonical=True)
    assert batch.captures.models is None, "read in bulk"
    assert_same_tables(
        score_columnar(batch, READS_ANSWER, ScoringConfig()).tables(),
        score_batch(list(zip(golden, models)), READS_ANSWER, ScoringConfig()).tables(),
    )


def test_a_line_over_the_limit_names_file_line_and_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(textfiles, "MAX_RECORD_BYTES", 1 << 20)
    cases, captures = _files(tmp_path, answer=2 * 1000 * 1000)
    line = len(Path(captures).read_bytes().split(b"\n")[1])
    expected = f"{captures}:2: the line is {line / 2**20:.1f} MiB; the limit is 1 MiB per record"
    with pytest.raises(InputError) as bulk:
        score_files(cases, captures, READS_ANSWER, ScoringConfig())
    assert str(bulk.value).startswith(expected), str(bulk.value)
    with pytest.raises(InputError) as per_record:
        read_records(captures)
    assert str(per_record.value).startswith(expected), str(per_record.value)
    with pytest.raises(InputError) as streamed:  # how a run reads its inputs (into a spool)
        list(iter_records(captures))
    assert str(streamed.value).startswith(expected), str(streamed.value)
    with pytest.raises(InputError) as unended:  # a line longer than the reader's chunks, with no line end
        list(iter_lines(captures, chunk_bytes=1 << 16, max_line=1 << 20))
    assert str(unended.value).startswith(expected), str(unended.value)
    commented = tmp_path / "commented.jsonl"  # the line numbers count a comment and a blank line, left out
    commented.write_text("// a note\n\n" + Path(captures).read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"{commented}:4: the line is")):
        ColumnarBatch.from_files(cases, commented)
    with pytest.raises(InputError, match=re.escape(f"{commented}:4: the line is")):
        read_records(commented)


def test_a_line_at_the_limit_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases, captures = _files(tmp_path, answer=2 * 1000 * 1000)
    longest = max(len(line) for line in Path(captures).read_bytes().split(b"\n"))
    monkeypatch.setattr(textfiles, "MAX_RECORD_BYTES", longest)
    n = len(_rows("mini_captures.jsonl"))
    assert len(ColumnarBatch.from_files(cases, captures)) == n
    assert len(read_records(captures)) == n
    assert len(list(iter_records(captures))) == n
    monkeypatch.setattr(textfiles, "MAX_RECORD_BYTES", longest - 1)
    with pytest.raises(InputError, match="per record"):
        ColumnarBatch.from_files(cases, captures)


def test_the_readme_states_the_limit() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert textfiles.MAX_RECORD_BYTES == 64 << 20
    assert "64 MiB per record" in readme
