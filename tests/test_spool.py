"""Inputs read a line at a time into a Spool: the records come back exactly as validated, by position,
slice and id; their source lines are kept for errors; the streaming line reader agrees with read_text."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.schemas import GoldenCase
from raglake.spool import Spool
from raglake.targets.replay import ReplayFile
from raglake.textfiles import iter_lines, read_text
from tests.conftest import FIXTURES


def test_a_loaded_golden_set_is_a_spool_that_gives_back_every_case_as_validated() -> None:
    path = FIXTURES / "mini_golden.jsonl"
    golden = load_golden(path)
    assert isinstance(golden.cases, Spool)
    expected = [GoldenCase.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
    assert list(golden.cases) == expected
    assert golden.cases[1:3] == expected[1:3] and golden.cases[-1] == expected[-1]
    assert golden.cases.get(expected[2].id) == expected[2] and golden.cases.get("no-such-id") is None
    assert golden.ids() == [c.id for c in expected]
    assert golden.cases.raw(0, 2) == b"".join(c.model_dump_json().encode() + b"\n" for c in expected[:2])
    with pytest.raises(IndexError):
        golden.cases[len(expected)]


def test_a_duplicate_id_names_both_lines_although_cases_are_not_kept_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    path.write_text('{"id": "a", "question": "q1"}\n\n{"id": "b", "question": "q2"}\n{"id": "a", "question": "q3"}\n')
    with pytest.raises(InputError, match=r"g.jsonl:4: field 'id': duplicate id 'a' \(first used at line 1\)"):
        load_golden(path)


def test_a_replay_file_finds_captures_by_case_and_names_the_line_of_an_unknown_one(tmp_path: Path) -> None:
    golden = load_golden(FIXTURES / "mini_golden.jsonl")
    target = ReplayFile(str(FIXTURES / "mini_captures.jsonl"))
    captures = target.capture(list(reversed(list(golden.cases))))
    assert [c.case_id for c in captures] == list(reversed(golden.ids()))
    bad = tmp_path / "c.jsonl"
    lines = (FIXTURES / "mini_captures.jsonl").read_text().splitlines()
    bad.write_text("\n".join([*lines[1:], lines[0].replace(golden.ids()[0], "zzz-unknown")]) + "\n")
    with pytest.raises(InputError, match=rf"c.jsonl:{len(lines)}: field 'case_id': no case 'zzz-unknown'"):
        ReplayFile(str(bad)).check(golden)


def test_a_spool_never_travels_to_another_process() -> None:
    with pytest.raises(TypeError, match="process-local"):
        pickle.dumps(load_golden(FIXTURES / "mini_golden.jsonl").cases)


@settings(max_examples=200, deadline=None)
@given(
    data=st.lists(
        st.sampled_from([b"a", b"\n", b"\xc3\xa9", b"\xe2\x80\xa8", b" ", b"{}", b"\xef\xbb\xbf"]), max_size=40
    ),
    chunk=st.integers(1, 9),
)
def test_streamed_lines_equal_the_whole_file_split(tmp_path_factory, data: list[bytes], chunk: int) -> None:
    path = tmp_path_factory.mktemp("lines") / "f.jsonl"
    path.write_bytes(b"".join(data))
    whole = read_text(path).split("\n")
    if whole and whole[-1] == "":
        whole.pop()
    assert list(iter_lines(path, chunk)) == list(enumerate(whole, start=1))


def test_invalid_utf8_is_reported_at_its_line_whatever_the_chunk(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": "\xff"}\n')
    for chunk in (1, 5, 1 << 20):
        with pytest.raises(InputError, match=r"f.jsonl:3: invalid UTF-8: byte 0xff"):
            list(iter_lines(path, chunk))


KEEP_A_SPOOL = """
import sys
from raglake.schemas import GoldenCase
from raglake.spool import Spool
spool = Spool(GoldenCase, "id")
spool.append(GoldenCase(id="a", question="q"))
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGTERM"])
def test_a_killed_process_leaves_no_spool_in_the_temp_folder(tmp_path: Path, signal_name: str) -> None:
    """A run ended by the OOM killer, a timeout or a cancellation (SIGTERM's default action runs no
    clean-up) would leave its spools behind: ~1.5 GB for a million cases, in /tmp, every time."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-c", KEEP_A_SPOOL], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(getattr(signal, signal_name))
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
    assert list(tmp_path.iterdir()) == []
