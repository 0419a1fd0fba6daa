"""Bad bytes get the same clear error as bad fields (issue 10, items 5-7): invalid UTF-8, deep nesting,
a folder, line separators inside JSON strings, a BOM, blank ids, duplicate keys, loose types, NaN."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.schemas import Capture, GoldenCase
from raglake.targets.journal import CaptureJournal
from raglake.targets.replay import ReplayFile
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

CASE = {"id": "a", "question": "q"}
CAPTURE = {"case_id": "a", "answer": "x", "retrieved": [{"rank": 1, "rel_path": "a.md", "score": 0.5}]}
SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"


def _bytes(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _error(loader, path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        loader(path)
    err = info.value
    where = f"{path}:{err.line}:" if err.line is not None else f"{path}:"  # a folder has no line
    assert err.path == str(path) and str(err).startswith(where)
    return err


# --- item 5: invalid UTF-8, deep nesting, a folder ------------------------------------------------------

INVALID_UTF8 = {
    ".jsonl": b'{"id": "a", "question": "q"}\n{"id": "b", "question": "caf\xe9"}\n',
    ".json": b'[\n {"id": "a", "question": "q"},\n {"id": "b", "question": "caf\xe9"}\n]\n',
    ".yaml": b"- id: a\n  question: q\n- id: b\n  question: caf\xe9\n",
}


@pytest.mark.parametrize("suffix", list(INVALID_UTF8))
def test_invalid_utf8_names_the_line_of_the_first_bad_byte(tmp_path: Path, suffix: str) -> None:
    data = INVALID_UTF8[suffix]
    err = _error(load_golden, _bytes(tmp_path / f"g{suffix}", data))
    assert err.line == data[: data.index(b"\xe9")].count(b"\n") + 1
    assert "invalid UTF-8" in err.message and "0xe9" in err.message


def test_invalid_utf8_in_a_capture_file(tmp_path: Path) -> None:
    path = _bytes(tmp_path / "c.jsonl", json.dumps(CAPTURE).encode() + b'\n{"case_id": "b", "answer": "\xff"}\n')
    assert _error(ReplayFile, path).line == 2


NESTED = 200_000


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".yaml"])
def test_json_nested_200000_deep_is_an_input_error(tmp_path: Path, suffix: str) -> None:
    deep = "[" * NESTED + "]" * NESTED
    text = {
        ".jsonl": f"{json.dumps(CASE)}\n\n" + '{"id": "b", "question": "q", "metadata": {"x": ' + deep + "}}\n",
        ".json": f"[{json.dumps(CASE)},\n\n" + '{"id": "b", "question": "q", "metadata": {"x": ' + deep + "}}]\n",
        ".yaml": f"- {json.dumps(CASE)}\n\n" + '- {"id": "b", "question": "q", "metadata": {"x": ' + deep + "}}\n",
    }[suffix]
    err = _error(load_golden, _bytes(tmp_path / f"g{suffix}", text.encode()))
    assert err.line == 3 and "nested" in err.message


def test_metadata_nested_deeper_than_the_lake_can_store_is_an_input_error(tmp_path: Path) -> None:
    """300 levels parse, but would fail later when the case is hashed or landed."""
    deep = json.loads("[" * 300 + "]" * 300)
    err = _error(load_golden, _bytes(tmp_path / "g.jsonl", json.dumps({**CASE, "metadata": {"x": deep}}).encode()))
    assert err.line == 1 and err.field == "metadata" and "nested" in err.message


def test_a_folder_as_golden_set_or_capture_file(tmp_path: Path) -> None:
    folder = tmp_path / "golden.jsonl"
    folder.mkdir()
    for loader in (load_golden, ReplayFile):
        err = _error(loader, folder)
        assert err.line is None and "is a folder" in err.message


# --- item 6: JSONL is split on "\n" only, a BOM is accepted ----------------------------------------------


def test_line_separators_inside_json_strings_are_kept(tmp_path: Path) -> None:
    question = f"one{SEPARATORS}two"
    lines = [
        json.dumps({"id": "a", "question": question}, ensure_ascii=False),
        json.dumps({"id": "b", "question": "q", "difficulty": "hardd"}),
    ]
    path = _bytes(tmp_path / "g.jsonl", "\n".join(lines).encode())
    err = _error(load_golden, path)
    assert err.line == 2 and err.field == "difficulty"  # line numbers count "\n" only
    path.write_text(lines[0] + "\r\n", encoding="utf-8")
    (case,) = load_golden(path).cases
    assert case.question == question


def test_line_separators_in_a_capture_file(tmp_path: Path) -> None:
    capture = {**CAPTURE, "answer": f"x{SEPARATORS}y"}
    path = _bytes(tmp_path / "c.jsonl", json.dumps(capture, ensure_ascii=False).encode() + b"\n")
    golden = GoldenCase(id="a", question="q")
    (got,) = ReplayFile(str(path)).capture([golden])
    assert got.answer == capture["answer"]


def test_the_capture_journal_keeps_a_capture_holding_a_line_separator(tmp_path: Path) -> None:
    journal = CaptureJournal(tmp_path / "journal.jsonl")
    cases = [GoldenCase(id="a", question="q"), GoldenCase(id="b", question="r")]
    journal.append(cases[0], Capture(case_id="a", answer="line\u2028break\u2029para\x85next"))
    journal.append(cases[1], Capture(case_id="b", answer="plain"))
    with journal.path.open("a", encoding="utf-8") as f:
        f.write('{"case_key": "cut short by a kill", "capt')
    done = journal.completed(cases)
    assert sorted(done) == ["a", "b"] and done["a"].answer == "line\u2028break\u2029para\x85next"


def test_the_capture_journal_ignores_a_tail_cut_inside_a_utf8_character(tmp_path: Path) -> None:
    journal = CaptureJournal(tmp_path / "journal.jsonl")
    case = GoldenCase(id="a", question="q")
    journal.append(case, Capture(case_id="a", answer="caf\u00e9"))
    with journal.path.open("ab") as f:  # a kill in the middle of the two bytes of "\u00e9"
        f.write('{"case_key": "k", "capture": {"case_id": "b", "answer": "caf\u00e9'.encode()[:-1])
    assert journal.completed([case])["a"].answer == "caf\u00e9"


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".yaml"])
def test_a_utf8_bom_is_accepted(tmp_path: Path, suffix: str) -> None:
    text = {
        ".jsonl": json.dumps(CASE) + "\n",
        ".json": json.dumps({"cases": [CASE]}),
        ".yaml": "- id: a\n  question: q\n",
    }[suffix]
    (case,) = load_golden(_bytes(tmp_path / f"g{suffix}", b"\xef\xbb\xbf" + text.encode())).cases
    assert case.id == "a"
    text = {".jsonl": json.dumps(CAPTURE), ".json": json.dumps([CAPTURE]), ".yaml": "- " + json.dumps(CAPTURE)}[suffix]
    captures = _bytes(tmp_path / f"c{suffix}", b"\xef\xbb\xbf" + text.encode())
    assert ReplayFile(str(captures)).capture([case])[0].answer == "x"


# --- item 7: accepted silently before, errors now -------------------------------------------------------

REJECTED_GOLDEN = [
    ("blank_id.jsonl", '{"id": "a", "question": "q"}\n{"id": "  ", "question": "q"}\n', 2, "id", "blank"),
    ("empty_id.jsonl", '{"id": "", "question": "q"}\n', 1, "id", "blank"),
    ("tab_id.yaml", '- id: "\\t"\n  question: q\n', 1, "id", "blank"),
    (
        "dup_key.jsonl",
        '{"id": "a", "question": "q"}\n{"id": "b", "question": "q", "id": "c"}\n',
        2,
        None,
        "duplicate key 'id'",
    ),
    (
        "dup_nested_key.json",
        (
            '[\n {"id": "a", "question": "q",\n  "gold_supports": [{"rel_path": "x.md"},\n'
            '   {"rel_path": "y.md",\n    "rel_path": "z.md"}]}\n]\n'
        ),
        5,
        None,
        "duplicate key 'rel_path'",
    ),
    ("dup_escaped_key.jsonl", '{"id": "a", "question": "q", "\\u0069d": "b"}\n', 1, None, "duplicate key 'id'"),
    ("dup_key.yaml", "- id: a\n  question: q\n  tags: [x]\n  question: r\n", 4, None, "duplicate key 'question'"),
    ("answerable_yes.jsonl", '{"id": "a", "question": "q", "answerable": "yes"}\n', 1, "answerable", "valid boolean"),
    ("answerable_one.jsonl", '{"id": "a", "question": "q", "answerable": 1}\n', 1, "answerable", "valid boolean"),
    ("answerable_yes.yaml", '- id: a\n  question: q\n  answerable: "yes"\n', 3, "answerable", "valid boolean"),
    (
        "required_str.jsonl",
        '{"id": "a", "question": "q", "gold_supports": [{"rel_path": "x.md", "required": "true"}]}\n',
        1,
        "gold_supports[0].required",
        "valid boolean",
    ),
    (
        "label_str.jsonl",
        '{"id": "a", "question": "q", "labels": {"chunks": [{"rel_path": "x.md", "misleading": "1"}]}}\n',
        1,
        "labels.chunks[0].misleading",
        "valid integer",
    ),
    (
        "group_float.jsonl",
        '{"id": "a", "question": "q", "gold_supports": [{"rel_path": "x.md"}], "required_support_groups": [[0.0]]}\n',
        1,
        "required_support_groups[0][0]",
        "valid integer",
    ),
    (
        "nan.jsonl",
        '{"id": "a", "question": "q"}\n{"id": "b", "question": "q", "metadata": {"w": NaN}}\n',
        2,
        None,
        "NaN",
    ),
    (
        "infinity.json",
        '{"cases": [\n {"id": "a", "question": "q",\n  "metadata": {"w": -Infinity}}]}\n',
        3,
        None,
        "Infinity",
    ),
    (
        "nan_in_string_ok_then_nan.json",
        '[{"id": "a", "question": "NaN Infinity",\n "metadata": {"w": [1,\nNaN]}}]',
        3,
        None,
        "NaN",
    ),
    ("nan.yaml", "- id: a\n  question: q\n  metadata:\n    w: .nan\n", 4, None, "NaN"),
    (
        "lone_surrogate.jsonl",
        '{"id": "a", "question": "q"}\n{"id": "b", "question": "x\\ud800y"}\n',
        2,
        None,
        "surrogate",
    ),
    ("lone_surrogate_key.json", '[{"id": "a",\n "\\udc00": "q"}]', 2, None, "surrogate"),
    ("lone_surrogate.yaml", '- id: a\n  question: "x\\ud800"\n', 2, None, "surrogate"),
]


@pytest.mark.parametrize(
    ("name", "text", "line", "field", "words"), REJECTED_GOLDEN, ids=[r[0] for r in REJECTED_GOLDEN]
)
def test_silently_accepted_golden_input_is_now_an_error(
    tmp_path: Path, name: str, text: str, line: int, field: str | None, words: str
) -> None:
    err = _error(load_golden, _bytes(tmp_path / name, text.encode()))
    assert (err.line, err.field) == (line, field)
    assert words in err.message


REJECTED_CAPTURES = [
    ({**CAPTURE, "case_id": " "}, "case_id", "blank"),
    ({**CAPTURE, "abstained": "no"}, "abstained", "valid boolean"),
    ({**CAPTURE, "retrieved": [{"rank": "1", "rel_path": "a.md"}]}, "retrieved[0].rank", "valid integer"),
    ({**CAPTURE, "retrieved": [{"rank": 1, "rel_path": "a.md", "score": "0.5"}]}, "retrieved[0].score", "valid number"),
    ({**CAPTURE, "retrieved": [{"rank": 1, "rel_path": "a.md", "score": True}]}, "retrieved[0].score", "valid number"),
    ({**CAPTURE, "latency_ms": {"total": "12"}}, "latency_ms.total", "valid number"),
    ({**CAPTURE, "attempts": 1.5}, "attempts", "valid integer"),
]


@pytest.mark.parametrize(
    ("capture", "field", "words"), REJECTED_CAPTURES, ids=[r[1] + "-" + r[2] for r in REJECTED_CAPTURES]
)
def test_loose_capture_fields_are_errors(tmp_path: Path, capture: dict, field: str, words: str) -> None:
    path = _bytes(
        tmp_path / "c.jsonl", (json.dumps(CAPTURE | {"case_id": "z"}) + "\n" + json.dumps(capture) + "\n").encode()
    )
    err = _error(ReplayFile, path)
    assert (err.line, err.field) == (2, field) and words in err.message


def test_a_nan_chunk_score_in_a_capture_file(tmp_path: Path) -> None:
    text = json.dumps(CAPTURE).replace("0.5", "NaN")
    err = _error(ReplayFile, _bytes(tmp_path / "c.jsonl", f"\n{text}\n".encode()))
    assert err.line == 2 and "NaN" in err.message
    err = _error(ReplayFile, _bytes(tmp_path / "c.yaml", b"- case_id: a\n  retrieved:\n  - rank: 1\n    score: .inf\n"))
    assert err.line == 4 and "Infinity" in err.message
    err = _error(ReplayFile, _bytes(tmp_path / "c2.jsonl", json.dumps(CAPTURE).replace("0.5", "1e400").encode()))
    assert (err.line, err.field) == (1, "retrieved[0].score") and "finite" in err.message  # 1e400 parses as inf
    err = _error(
        load_golden, _bytes(tmp_path / "g.jsonl", b'{"id": "a", "question": "q", "metadata": {"w": [-1e999]}}')
    )
    assert (err.line, err.field) == (1, "metadata") and "-inf" in err.message


def test_ints_stay_acceptable_for_floats_and_a_surrogate_pair_is_fine(tmp_path: Path) -> None:
    capture = {**CAPTURE, "retrieved": [{"rank": 1, "rel_path": "a.md", "score": 1}], "latency_ms": {"total": 12}}
    path = _bytes(tmp_path / "c.jsonl", json.dumps(capture).encode())
    (got,) = ReplayFile(str(path)).capture([GoldenCase(id="a", question="q")])
    assert got.retrieved[0].score == 1.0 and got.latency_ms.total == 12.0
    golden = _bytes(tmp_path / "g.jsonl", b'{"id": "a", "question": "smile \\ud83d\\ude00", "answerable": false}')
    assert load_golden(golden).cases[0].question == "smile \U0001f600"


# --- the command line: exit 2 with FILE:LINE, and the lake's bytes unchanged ----------------------------------


def _lake_bytes(lake: Path) -> dict[str, str]:
    return {
        str(p.relative_to(lake)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(lake.rglob("*"))
        if p.is_file()
    }


@pytest.mark.e2e
def test_cli_bad_bytes_in_a_capture_file_exit_2_and_leave_the_lake_alone(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land(str(lake), str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-before")
    before = _lake_bytes(lake)
    first = (FIXTURES / "mini_captures.jsonl").read_bytes().split(b"\n")[0]
    bad = _bytes(tmp_path / "bad.jsonl", first + b'\n{"case_id": "c2", "answer": "caf\xe9"}\n')
    env = {**os.environ, "RAGLAKE_LAKE": str(lake), "COLUMNS": "300"}
    command = [
        sys.executable,
        "-m",
        "raglake",
        "run",
        "--golden",
        str(FIXTURES / "mini_golden.jsonl"),
        "--target",
        f"replay:{bad}",
    ]
    done = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"error: {bad}:2: invalid UTF-8" in " ".join(done.stdout.split()) and "Traceback" not in done.stderr
    assert _lake_bytes(lake) == before
