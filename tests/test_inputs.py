"""A run's inputs loaded side by side (the golden set in a second process while this one validates the
replay file) are the inputs a one-process load gives: same cases, same spool bytes, same lines, same
content hash; and a bad input raises the same error, naming file, line and field."""

from __future__ import annotations

import gc
import pickle
import subprocess
import sys
import tempfile
import weakref
from pathlib import Path

import pytest

from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.golden_process import _crosses
from raglake.lake.store import Lake
from raglake.pipeline import inputs
from raglake.pipeline.inputs import load_inputs, side_by_side
from raglake.pipeline.settings import SAMPLE_CAPTURES, SAMPLE_GOLDEN, RunSettings
from raglake.spool import Spool

GOOD_CASE = '{"id": "a", "question": "q1"}\n'
GOOD_CAPTURE = '{"case_id": "a", "answer": "x"}\n'


def _settings(golden: str, target: str, lake: Path) -> RunSettings:
    return RunSettings(golden=golden, target=target, lake=str(lake), metrics=["mrr_at_k"])


def _files(tmp_path: Path, golden: str, captures: str) -> tuple[str, str]:
    (tmp_path / "g.jsonl").write_text(golden)
    (tmp_path / "c.jsonl").write_text(captures)
    return str(tmp_path / "g.jsonl"), f"replay:{tmp_path / 'c.jsonl'}"


@pytest.fixture
def every_size(monkeypatch) -> None:
    """Any file is large enough to go side by side."""
    monkeypatch.setattr(inputs, "SIDE_BY_SIDE_BYTES", 0)


@pytest.mark.usefixtures("every_size")
def test_side_by_side_gives_what_one_process_gives(tmp_path: Path, monkeypatch) -> None:
    settings = _settings(SAMPLE_GOLDEN, SAMPLE_CAPTURES[0], tmp_path / "lake")
    assert side_by_side(settings.golden, settings.target)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    golden, target = load_inputs(settings, Lake(settings.lake))
    assert list((tmp_path / "tmp").iterdir()) == []  # the spool the other process filled has no name there
    monkeypatch.setattr(inputs, "SIDE_BY_SIDE_BYTES", 1 << 62)
    assert not side_by_side(settings.golden, settings.target)
    alone, alone_target = load_inputs(settings, Lake(settings.lake))
    assert isinstance(golden.cases, Spool) and isinstance(alone.cases, Spool)
    assert golden.cases.fileno() != alone.cases.fileno()
    assert (golden.name, golden.path, golden.content_hash) == (alone.name, alone.path, alone.content_hash)
    assert golden.ids() == alone.ids() and len(golden.cases) > 10
    n = len(golden.cases)
    assert golden.cases.raw(0, n) == alone.cases.raw(0, n)
    assert [golden.cases.line(i) for i in range(n)] == [alone.cases.line(i) for i in range(n)]
    last = golden.ids()[-1]
    assert golden.cases.get(last) == alone.cases.get(last) and list(golden.cases) == list(alone.cases)
    assert target.content_key() == alone_target.content_key()
    file = weakref.ref(golden.cases._file)
    del golden
    gc.collect()
    assert file() is None  # the spool that adopted the other process's records closes (frees) its file


@pytest.mark.usefixtures("every_size")
def test_a_bad_golden_case_from_the_other_process_names_file_line_and_field(tmp_path: Path) -> None:
    golden, target = _files(
        tmp_path, GOOD_CASE + '{"id": "b", "question": "q2", "answerable": "perhaps"}\n', GOOD_CAPTURE
    )
    with pytest.raises(InputError) as raised:
        load_inputs(_settings(golden, target, tmp_path / "lake"), Lake(str(tmp_path / "lake")))
    with pytest.raises(InputError) as alone:
        load_golden(golden)
    assert (raised.value.path, raised.value.line, raised.value.field) == (golden, 2, "answerable")
    assert str(raised.value) == str(alone.value)


@pytest.mark.usefixtures("every_size")
def test_when_both_inputs_are_bad_the_golden_sets_problem_is_reported_as_in_one_process(tmp_path: Path) -> None:
    golden, target = _files(tmp_path, GOOD_CASE + GOOD_CASE, GOOD_CAPTURE + "{not json\n")
    with pytest.raises(InputError, match=r"g.jsonl:2: field 'id': duplicate id 'a'"):
        load_inputs(_settings(golden, target, tmp_path / "lake"), Lake(str(tmp_path / "lake")))


@pytest.mark.usefixtures("every_size")
def test_a_bad_replay_file_with_a_good_golden_set_reports_the_replay_files_problem(tmp_path: Path) -> None:
    golden, target = _files(tmp_path, GOOD_CASE, GOOD_CAPTURE + '{"case_id": "a", "answer": "y"}\n')
    with pytest.raises(InputError, match=r"c.jsonl:2: field 'case_id': duplicate capture for case 'a'"):
        load_inputs(_settings(golden, target, tmp_path / "lake"), Lake(str(tmp_path / "lake")))


def test_small_files_and_other_targets_stay_in_one_process(monkeypatch) -> None:
    assert not side_by_side(SAMPLE_GOLDEN, SAMPLE_CAPTURES[0])  # the sample is far below the threshold
    monkeypatch.setattr(inputs, "SIDE_BY_SIDE_BYTES", 0)
    assert side_by_side(SAMPLE_GOLDEN, SAMPLE_CAPTURES[0])
    assert not side_by_side(SAMPLE_GOLDEN, "builtin")
    assert not side_by_side(SAMPLE_GOLDEN, "replay-run:r-1")


def test_an_other_process_that_ends_without_an_answer_is_an_error_naming_its_exit_code_and_output() -> None:
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stderr.write('it broke'); sys.exit(3)"],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        with pytest.raises(
            RuntimeError, match=r"validating g.jsonl ended without an answer \(exit code 3\):\nit broke$"
        ):
            inputs._answer(process, stderr, "g.jsonl")


NEEDS_TWO = """
from raglake.golden_process import _crosses
class NeedsTwo(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")
print(_crosses(NeedsTwo("a", "b")))
"""


def test_an_error_that_cannot_cross_processes_whole_is_sent_as_its_type_and_message() -> None:
    """Checked in a fresh interpreter, as the other process is one: a test process may have imported a
    library that teaches pickle every exception (distributed installs tblib's support)."""
    assert _crosses(InputError("g.jsonl", 2, "id", "duplicate id 'a'")) and _crosses(ValueError("x"))
    done = subprocess.run([sys.executable, "-c", NEEDS_TWO], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr[-2000:]


@pytest.mark.usefixtures("every_size")
def test_the_other_process_runs_raglakes_code_not_the_callers_script(tmp_path: Path) -> None:
    """A script without a main guard that loads large inputs: multiprocessing's spawn would run it again in
    the other process; a fresh interpreter does not."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from raglake.lake.store import Lake\n"
        "from raglake.pipeline import inputs\n"
        "from raglake.pipeline.settings import SAMPLE_CAPTURES, SAMPLE_GOLDEN, RunSettings\n"
        "inputs.SIDE_BY_SIDE_BYTES = 0\n"
        "print('script ran')\n"
        f"s = RunSettings(golden=SAMPLE_GOLDEN, target=SAMPLE_CAPTURES[0], lake={str(tmp_path / 'lake')!r})\n"
        "golden, _ = inputs.load_inputs(s, Lake(s.lake))\n"
        "print(len(golden.cases), golden.content_hash)\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    alone = load_golden(SAMPLE_GOLDEN)
    assert done.stdout.split("\n")[:2] == ["script ran", f"{len(alone.cases)} {alone.content_hash}"]


def test_an_input_error_crosses_processes_whole() -> None:
    e = pickle.loads(pickle.dumps(InputError("g.jsonl", 7, "id", "duplicate id 'a'")))
    assert (e.path, e.line, e.field, e.message, str(e)) == (
        "g.jsonl",
        7,
        "id",
        "duplicate id 'a'",
        "g.jsonl:7: field 'id': duplicate id 'a'",
    )
