"""A run's inputs, loaded and checked: the golden set (with its labels) and the target. When the golden
set and a replay file are both large, the golden set is validated by a second process while this one
validates the replay file: record-by-record validation is pure Python, so two processes use both cores
where threads would take turns (a million cases: 168 s in one process, 101 s in two). The second process
is a fresh interpreter (`python -m raglake.golden_process`): no fork of a process that may have threads,
and no import of the caller's script, which multiprocessing's spawn would run again."""

from __future__ import annotations

import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from raglake.children import child_env
from raglake.golden import GoldenSet, SpooledGolden, load_golden, load_labels
from raglake.lake.store import Lake
from raglake.pipeline.settings import RunSettings
from raglake.schemas import GoldenCase
from raglake.spool import Spool
from raglake.targets import Target, make_target, validated_file

SIDE_BY_SIDE_BYTES = 8 << 20  # both files at least this large (~10,000 cases): a second process pays off


def load_inputs(settings: RunSettings, lake: Lake) -> tuple[GoldenSet, Target]:
    """The golden set (labels merged) and the target, checked against each other. A problem raises the
    error a one-process load raises: the golden set's first, then the target's."""
    if side_by_side(settings.golden, settings.target):
        golden_set, the_target = _load_side_by_side(settings, lake)
    else:
        golden_set = load_golden(settings.golden)
        the_target = make_target(settings.target, lake, embedder=settings.embedder, k=settings.k)
    if settings.labels:
        golden_set = load_labels(settings.labels, golden_set)
    the_target.check(golden_set)
    return golden_set, the_target


def side_by_side(golden: str, target: str) -> bool:
    """Whether the golden set goes to a second process: it and the target's file are both large."""
    other = validated_file(target)
    return other is not None and bool(sys.executable) and min(_size(Path(golden)), _size(other)) >= SIDE_BY_SIDE_BYTES


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # a missing file: the one-process load names it


def _load_side_by_side(settings: RunSettings, lake: Lake) -> tuple[GoldenSet, Target]:
    """The golden set validated by raglake.golden_process into a spool of this process, while this one
    makes the target. If the target fails, the golden set's answer is awaited (its problem is the one
    raised); if this process is interrupted, the other is killed."""
    cases: Spool[GoldenCase] = Spool(GoldenCase, "id")
    with tempfile.TemporaryFile() as stderr:  # a file, not a pipe: what it prints never makes it wait
        process = subprocess.Popen(
            [sys.executable, "-m", "raglake.golden_process", str(settings.golden), str(cases.fileno())],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=child_env(),
            pass_fds=(cases.fileno(),),  # the spool's file has no name: the other process inherits it
        )
        return _collect(process, stderr, settings, lake, cases)


def _collect(
    process: subprocess.Popen, stderr: IO[bytes], settings: RunSettings, lake: Lake, cases: Spool[GoldenCase]
) -> tuple[GoldenSet, Target]:
    """The target, made here while the other process works, and the golden set it answers with."""
    try:
        try:
            the_target = make_target(settings.target, lake, embedder=settings.embedder, k=settings.k)
        except Exception:
            _answer(process, stderr, settings.golden)  # the golden set's own problem is the one reported
            raise
        return _answer(process, stderr, settings.golden).golden_set(cases), the_target
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def _answer(process: subprocess.Popen, stderr: IO[bytes], golden: str) -> SpooledGolden:
    """The other process's SpooledGolden; its error raised here."""
    out, _ = process.communicate()
    try:
        outcome = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        stderr.seek(0)
        tail = stderr.read().decode("utf-8", "replace").strip()[-2000:]
        raise RuntimeError(
            f"the process validating {golden} ended without an answer (exit code {process.returncode})"
            + (f":\n{tail}" if tail else "")
        ) from None
    if isinstance(outcome, Exception):
        raise outcome
    if not isinstance(outcome, SpooledGolden):
        raise RuntimeError(f"the process validating {golden} answered {type(outcome).__name__}")
    return outcome
