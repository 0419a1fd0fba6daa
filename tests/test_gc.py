"""`raglake gc` (raglake.pipeline.gc): lists what no re-run or resume can use (dry run by default, with
the bytes), removes exactly that with --apply, and leaves what an uncommitted run's resume, a re-run of
recent inputs or a write in progress uses, and anything that is not raglake's."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from tests.test_staged_verify import landed, staged_run

DAY = 86400


def _age(path: Path, seconds: float) -> None:
    """Make `path` (every file under it) look last written or used `seconds` ago."""
    when = time.time() - seconds
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(p, (when, when))


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, capsys.readouterr().out


@pytest.fixture
def world(tmp_path: Path) -> tuple[str, Path, set[str], set[str]]:
    """A lake with a committed run, a results location staged by it, and beside its files each kind of
    leftover: (lake, results, what gc must remove, what it must keep) as paths relative to the results."""
    lake, results = str(tmp_path / "lake"), tmp_path / "results"
    staged_run(lake, str(results), "r-done")
    cached = {str(p.relative_to(results)) for p in results.rglob("*") if p.is_file()}
    old = results / "captures" / "zz"
    shutil.copytree(results / "captures" / next(os.walk(results / "captures"))[1][0], old)
    garbage = {
        "judged/r-done": b"{}",  # a committed run's judge outcomes
        "judged/r-lost/a.json": b"{}",  # an uncommitted run nobody resumed for 9 days
        "metaeval/m-landed/items.jsonl": b"{}\n",  # rows in the lake already
        "scored/ab/score-killed/scores.parquet": b"half",  # no _done, 2 hours old
        "captures/ab/capture-nomarker.jsonl": b"{}\n",  # no .sha256 marker, 2 hours old
        "batches/ab/old.cases.jsonl": b"{}\n",  # unused for 9 days
        "scored/ab/.0123456789ab.tmp": b"x",  # a killed write's temp file
    }
    keep = {
        "judged/r-resume/a.json": b"{}",  # an uncommitted run's, yesterday: its resume uses it
        "metaeval/m-running/items.jsonl": b"{}\n",  # not landed yet
        "scored/ab/score-writing/scores.parquet": b"half",  # no _done yet, 10 minutes old: being written
        "batches/ab/new.cases.jsonl": b"{}\n",  # used 6 days ago
        "notes.txt": b"mine",  # not raglake's
    }
    for rel, data in {**garbage, **keep}.items():
        path = results / rel if rel != "judged/r-done" else results / rel / "x.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    ages = {
        "judged/r-lost": 9 * DAY,
        "metaeval/m-landed": 2 * DAY,
        "scored/ab/score-killed": 7200,
        "captures/ab/capture-nomarker.jsonl": 7200,
        "batches/ab/old.cases.jsonl": 9 * DAY,
        "scored/ab/.0123456789ab.tmp": 7200,
        "judged/r-resume": DAY,
        "scored/ab/score-writing": 600,
        "batches/ab/new.cases.jsonl": 6 * DAY,
        "judged/r-done": 7200,
    }
    for rel, seconds in ages.items():
        _age(results / rel, seconds)
    _age(old, 8 * DAY)  # a copy of the run's captures, with their marker, unused for 8 days
    Lake(lake).write("metaeval", "m-landed", TABLES["metaeval"].schema.empty_table(), "m-landed")
    folders = {"judged": 2, "metaeval": 2, "scored": 3}  # what gc removes as one folder: parts of its path
    units = {"/".join(r.split("/")[: folders.get(r.split("/")[0], 9)]) if "/." not in r else r for r in garbage}
    gone = {*units, *(f"captures/zz/{p.name}" for p in old.iterdir())}
    return lake, results, gone, {*keep, *cached}


def test_gc_lists_by_default_and_removes_only_with_apply(world, monkeypatch, capsys) -> None:
    lake, results, gone, kept = world
    before = _tree(results)
    code, out = _main(monkeypatch, capsys, "gc", "--lake", lake, "--results", str(results))
    assert code == 0 and _tree(results) == before  # a dry run changes nothing
    listed = {line.split("  ")[0] for line in out.splitlines() if "  " in line}
    assert listed == gone, out
    total = sum(len(v) for k, v in before.items() if any(k == g or k.startswith(g + "/") for g in gone))
    assert f"would remove {len(gone)} item(s), " in out and f"({total} bytes)" in out and "--apply" in out

    code, out = _main(monkeypatch, capsys, "gc", "--lake", lake, "--results", str(results), "--apply")
    assert code == 0 and f"removed {len(gone)} item(s)" in out
    left = _tree(results)
    assert {k for k in before if k not in left} == {
        k for k in before if any(k == g or k.startswith(g + "/") for g in gone)
    }
    assert all(any(k == s or k.startswith(s + "/") for k in left) for s in kept)
    assert not (results / "judged" / "r-done").exists() and not (results / "captures" / "zz").exists()
    code, out = _main(monkeypatch, capsys, "gc", "--lake", lake, "--results", str(results))
    assert "nothing to remove" in out


def test_a_re_run_after_gc_lands_the_same_values_and_reuse_keeps_files(world, monkeypatch, capsys) -> None:
    """What gc keeps is what a re-run finds again (each reuse touches it); after gc --keep-days 0 removes
    all cached work, the re-run recomputes it and lands the same values."""
    lake, results, *_ = world
    for path in results.rglob("*"):
        _age(path, 30 * DAY)
    staged_run(lake, str(results), "r-again")  # finds the cases, captures and scored batches: touched
    code, out = _main(monkeypatch, capsys, "gc", "--lake", lake, "--results", str(results))
    listed = {line.split("  ")[0] for line in out.splitlines() if "  " in line}
    assert not [p for p in listed if p.startswith(("scored/", "batches/")) and "ab/" not in p], out
    assert landed(lake, "r-again") == landed(lake, "r-done")
    for path in results.rglob("*"):
        _age(path, 7200)  # past the hour in which nothing is removed (a write in progress)
    _main(monkeypatch, capsys, "gc", "--lake", lake, "--results", str(results), "--apply", "--keep-days", "0")
    assert not list(results.glob("scored/*/score-*/_done")) and not list(results.glob("captures/*/*"))
    staged_run(lake, str(results), "r-after")
    assert landed(lake, "r-after") == landed(lake, "r-done")
