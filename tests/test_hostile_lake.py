"""A damaged lake still answers (issue 25): files cut short, overwritten with garbage, emptied, of another
schema or with a column of another type, in committed runs' partitions, in runs/ and in judge_calls/.
Every command that reads the lake answers exactly what it answers for the lake without the damaged runs,
with one warning line per damaged file naming it and the reason (on stderr): a run with a damaged file of
its own is left out whole, never shown with part of its rows; a stray file is skipped alone. A new run
lands and exits 0. `raglake doctor` finds every damaged or foreign file, `--quarantine` moves them under
`_quarantine/` with a log (nothing deleted) and the lake answers without warnings. A lake path that is
a file, a device or read-only, and a disk that fills while landing, end in one line each."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from raglake.errors import LakeError
from raglake.lake.checks import check_lake_root, schema_problem
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from tests.conftest import ROOT
from tests.lakekit import (
    DAMAGE_KINDS,
    DAMAGED_RUNS,
    HEALTHY_RUNS,
    MINI_GOLDEN,
    MINI_REPLAY,
    damage,
    drop_runs,
    healthy_lake,
    land,
    make_hostile,
    run_file,
)

RULES = ROOT / "data" / "gate.yaml"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """The healthy lake the hostile one is made from (landed once for the module)."""
    lake = tmp_path_factory.mktemp("hostile") / "lake"
    healthy_lake(lake)
    return lake


@pytest.fixture
def lakes(template: Path, tmp_path: Path) -> tuple[Path, Path, list[Path]]:
    """(the hostile lake, the same lake without the damaged runs, the damaged files)."""
    hostile, reference = tmp_path / "hostile", tmp_path / "reference"
    shutil.copytree(template, hostile)
    shutil.copytree(template, reference)
    drop_runs(reference, list(DAMAGED_RUNS))
    return hostile, reference, make_hostile(hostile)


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`raglake ARGS` through the console script's entry point in this process: exit code, stdout, stderr."""
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *args])
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    return exited.value.code or 0, captured.out, captured.err


READS = {
    "runs": ["runs"],
    "breakdown": ["breakdown", "-r", "r-two", "--by", "category"],
    "compare": ["compare", "r-two", "r-three"],
    "trend": ["trend", "--metric", "mrr_at_k"],
    "health": ["health", "-r", "r-two", "-r", "r-three"],
    "coverage": ["coverage"],
    "sql": ["sql", "SELECT run_id, metric, count(*) AS n, avg(value) AS mean FROM scores GROUP BY ALL ORDER BY ALL"],
    "sql-runs": ["sql", "SELECT run_id, n_cases FROM runs ORDER BY run_id"],
    "gate": ["gate", "--candidate", "r-three", "--baseline", "r-two", "--rules", str(RULES)],
    "rescore-plan": ["rescore", "r-two", "r-three", "--dry-run", "--quiet"],
    "report": ["report", "r-two", "--against", "r-three", "-o", "{out}/report.html"],
}


def _warned(err: str, damaged: list[Path]) -> None:
    """One warning line per damaged file, naming it and why (and nothing else on stderr)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert all(line.startswith("warning: ") for line in lines), err
    for path in damaged:
        named = [line for line in lines if f"{path}:" in line]
        assert len(named) == 1, (path, err)
        assert re.search(
            r"(not a Parquet file|empty file|unreadable Parquet|is not a column|column '\w+' is string)", named[0]
        ), named
    assert len(lines) == len(damaged), err
    for run_id in DAMAGED_RUNS:
        assert f"run {run_id} is left out" in err


@pytest.mark.parametrize("command", list(READS), ids=list(READS))
def test_every_read_command_answers_as_if_the_damaged_runs_were_not_there(
    lakes: tuple[Path, Path, list[Path]], command: str, monkeypatch, capsys, tmp_path: Path
) -> None:
    hostile, reference, damaged = lakes
    answers = {}
    for name, lake in (("hostile", hostile), ("reference", reference)):
        (tmp_path / name).mkdir(exist_ok=True)
        args = [a.replace("{out}", str(tmp_path / name)) for a in READS[command]]
        code, out, err = _main(monkeypatch, capsys, *args, "--lake", str(lake))
        answers[name] = (code, out.replace(str(lake), "LAKE").replace(str(tmp_path / name), "OUT"), err)
    code, out, err = answers["hostile"]
    assert code == answers["reference"][0] == 0, out + err
    assert out == answers["reference"][1]
    assert answers["reference"][2] == ""
    _warned(err, damaged)
    if command == "report":
        page = (tmp_path / "hostile" / "report.html").read_text()
        assert "r-two" in page and not any(run_id in page for run_id in DAMAGED_RUNS)


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_new_run_lands_in_a_damaged_lake_and_exits_0(lakes, monkeypatch, capsys) -> None:
    """The probe's worst case: the run landed, then its summary read the damaged file and exited 1 (a
    CI retry landed it twice)."""
    hostile, _, damaged = lakes
    args = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--run-id", "r-new", "--quiet"]
    code, out, err = _main(monkeypatch, capsys, *args, "--lake", str(hostile))
    assert code == 0, out + err
    assert "landed run(s): r-new" in " ".join(out.split())
    assert all(err.count(f"{path}:") == 1 for path in damaged), err
    con = connect(Lake(hostile))
    assert fetch(con, "SELECT run_id FROM runs ORDER BY run_id") == [("r-new",), ("r-three",), ("r-two",)]
    means = "SELECT metric, avg(value) FROM scores WHERE run_id = $r GROUP BY ALL ORDER BY ALL"
    assert repr(fetch(con, means, r="r-new")) == repr(fetch(con, means, r="r-two"))  # same inputs, same means (NaN too)


def _one_run_lake(folder: Path) -> Path:
    lake = folder / "lake"
    for i, run_id in enumerate(("r-one", "r-two")):
        land(str(lake), MINI_GOLDEN, MINI_REPLAY, run_id, minutes=i)
    return lake


@pytest.mark.parametrize("kind", DAMAGE_KINDS)
@pytest.mark.parametrize("place", ["scores", "cases", "runs", "stray"])
def test_each_damage_alone_leaves_out_its_run_or_only_itself(tmp_path: Path, kind: str, place: str, capfd) -> None:
    """Each kind of damage on its own, in a run's file of scores, cases or runs (the run is left out) or
    as a stray file beside it (skipped; the run is kept whole): no phantom row, no error naming no file."""
    lake = _one_run_lake(tmp_path)
    counts = fetch(connect(Lake(lake)), "SELECT run_id, count(*) FROM scores GROUP BY ALL ORDER BY ALL")
    if place == "stray":
        path = lake / "scores" / "run_id=r-one" / "copy.parquet"
        damage(path, kind, "scores")
    else:
        path = run_file(lake, place, "r-one")
        damage(path, kind, place)
    capfd.readouterr()
    con = connect(Lake(lake))
    err = capfd.readouterr().err
    left = fetch(con, "SELECT run_id, count(*) FROM scores GROUP BY ALL ORDER BY ALL")
    assert left == (counts if place == "stray" else counts[1:])
    assert [r[0] for r in fetch(con, "SELECT run_id FROM runs ORDER BY 1")] == [r[0] for r in left]
    assert fetch(con, "SELECT count(*) FROM scores WHERE metric IS NULL OR case_id IS NULL") == [(0,)]
    assert err.count("warning: ") == 1 and f"{path}:" in err
    assert ("skipped" in err) if place == "stray" else ("run r-one is left out" in err)


def test_files_of_older_layouts_are_kept_and_only_those() -> None:
    """Readers keep a file whose every column is the table's (this layout's or an older one's) with the
    table's type; any other column or type makes it a file of another schema."""
    runs = TABLES["runs"].schema
    old = pa.schema([runs.field("run_id"), pa.field("target", pa.string()), pa.field("metric_versions", pa.string())])
    assert schema_problem("runs", runs) is None and schema_problem("runs", old) is None
    assert "is not a column of the runs table" in schema_problem("runs", runs.append(pa.field("x", pa.int64())))
    assert schema_problem("scores", pa.schema([pa.field("value", pa.string())])) == (
        "column 'value' is string, the scores table's is double"
    )
    assert "run_id" in schema_problem("scores", TABLES["scores"].full_schema)  # the partition column is the path's


def test_a_footer_is_read_once_per_file_version(tmp_path: Path, monkeypatch) -> None:
    """Checking costs one footer per file per process: a second open of the lake reads none, and a file
    replaced in place is checked again."""
    import raglake.lake.checks as checks

    lake = _one_run_lake(tmp_path)
    connect(Lake(lake))
    reads: list[str] = []
    real = checks.pq.read_schema
    monkeypatch.setattr(checks.pq, "read_schema", lambda source, **kw: reads.append(str(source)) or real(source, **kw))
    connect(Lake(lake))
    assert reads == []
    path = run_file(lake, "scores", "r-one")
    time.sleep(0.01)
    damage(path, "truncated", "scores")
    connect(Lake(lake))
    assert reads == [str(path)]


@pytest.mark.parametrize("where", ["file", "device"])
def test_a_lake_that_is_not_a_folder_is_one_line(tmp_path: Path, where: str, monkeypatch, capsys) -> None:
    lake = tmp_path / "lake.txt" if where == "file" else Path(os.devnull)
    if where == "file":
        lake.write_text("not a lake")
    run = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--quiet"]  # refused before any work
    for args in (["runs"], ["sql", "SELECT 1"], ["doctor"], ["gc"], run):
        code, out, err = _main(monkeypatch, capsys, *args, "--lake", str(lake))
        assert code == 2, (args, out, err)
        kind = "a file" if where == "file" else "not a regular folder (a device or a socket)"
        assert (
            " ".join(out.split())
            == f"error: the lake {lake} is {kind}: give --lake a folder (it is created when missing)"
        )


def test_check_lake_root_is_the_one_check_of_a_usable_lake(tmp_path: Path, monkeypatch) -> None:
    """raglake.lake.store.check_lake_root: what the command line and the Python API both call."""
    from raglake.lake.store import check_lake_root as exported

    assert exported is check_lake_root
    check_lake_root(tmp_path / "new" / "lake", write=True)  # created by its first run
    (tmp_path / "f").write_text("x")
    with pytest.raises(LakeError, match="cannot be created: .*/f is not a folder"):
        check_lake_root(tmp_path / "f" / "lake", write=True)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == tmp_path else real(p, mode, **kw))
    check_lake_root(tmp_path / "lake")  # reading a read-only lake is fine
    with pytest.raises(LakeError, match=f"the lake {tmp_path}/lake cannot be written: {tmp_path} is read-only"):
        check_lake_root(tmp_path / "lake", write=True)


def test_a_read_only_lake_is_said_before_a_landing_writes_anything(tmp_path: Path, monkeypatch) -> None:
    lake = _one_run_lake(tmp_path)
    before = _tree(lake)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == lake else real(p, mode, **kw))
    with pytest.raises(LakeError, match=f"^the lake {lake} cannot be written: {lake} is read-only$"):
        land(str(lake), MINI_GOLDEN, MINI_REPLAY, "r-ro", minutes=9)
    assert _tree(lake) == before


@pytest.mark.parametrize(("code", "words"), [(errno.ENOSPC, "No space left on device"), (errno.EROFS, "Read-only")])
def test_a_write_that_fails_lands_nothing_and_says_so_in_one_line(tmp_path: Path, monkeypatch, code, words) -> None:
    """A disk that fills (or a mount that turns read-only) on the third file of a landing: one LakeError
    naming the run and the file, no temp file left, and the run is not visible (its runs row is last)."""
    import raglake.lake.store as store

    lake = _one_run_lake(tmp_path)
    before = {p for p in lake.rglob("*") if p.is_file()}
    real_open, opened = store.pq.ParquetWriter, []

    def filling(sink, *args, **kw):
        opened.append(sink)
        if len(opened) == 3:
            raise OSError(code, os.strerror(code))
        return real_open(sink, *args, **kw)

    monkeypatch.setattr(store.pq, "ParquetWriter", filling)
    with pytest.raises(LakeError) as failed:
        land(str(lake), MINI_GOLDEN, MINI_REPLAY, "r-full", minutes=9)
    message = str(failed.value)
    assert "\n" not in message and message.startswith("run r-full was not landed, nothing of it is visible: cannot")
    assert words in message
    assert fetch(connect(Lake(lake)), "SELECT run_id FROM runs ORDER BY 1") == [("r-one",), ("r-two",)]
    assert not [p for p in lake.rglob("*.tmp")]
    assert {p for p in lake.rglob("*") if p.is_file() and "r-full" not in str(p)} == before


# ------------------------------------------------------------------------------------------------ doctor


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _leftovers(lake: Path) -> list[Path]:
    """What crashes and people leave: a temp file of a killed write and a partition of a run never
    committed (both a day old), a text file in a partition, a file outside the layout."""
    old = time.time() - 2 * 86400
    temp = lake / "scores" / "run_id=r-two" / ".s-000000000000.1234abcd.parquet.tmp"
    temp.write_bytes(b"half")
    crashed = lake / "cases" / "run_id=r-crashed" / "r-crashed.parquet"
    crashed.parent.mkdir()
    shutil.copy(run_file(lake, "cases", "r-two"), crashed)
    notes = lake / "scores" / "run_id=r-two" / "notes.txt"
    notes.write_text("mine")
    loose = lake / "scores" / "loose.parquet"
    shutil.copy(run_file(lake, "scores", "r-two"), loose)
    for path in (temp, crashed):
        os.utime(path, (old, old))
    return [temp, crashed, notes, loose]


def test_doctor_finds_every_damaged_or_foreign_file_and_changes_nothing(lakes, monkeypatch, capsys) -> None:
    hostile, reference, damaged = lakes
    code, out, err = _main(monkeypatch, capsys, "doctor", "--lake", str(reference))
    assert code == 0 and "no problem found" in out, out + err
    found = [*damaged, *_leftovers(hostile)]
    before = _tree(hostile)
    code, out, err = _main(monkeypatch, capsys, "doctor", "--lake", str(hostile))
    assert code == 1, out + err
    lines = [line for line in out.splitlines() if line.strip()]
    for path in found:
        (line,) = [line for line in lines if line.startswith(f"{path.relative_to(hostile)}: ")]
        assert len(line) > len(str(path.relative_to(hostile))) + 10
    assert len(lines) == len(found) + 1 and "raglake doctor --quarantine" in lines[-1]
    assert _tree(hostile) == before  # read-only


def test_doctor_quarantine_moves_them_aside_with_a_log_and_deletes_nothing(lakes, monkeypatch, capsys) -> None:
    hostile, reference, damaged = lakes
    _leftovers(hostile)
    before = _tree(hostile)
    code, out, err = _main(monkeypatch, capsys, "doctor", "--quarantine", "--lake", str(hostile))
    assert code == 0, out + err
    (folder,) = (hostile / "_quarantine").iterdir()
    log = [json.loads(line) for line in (folder / "quarantine.jsonl").read_text().splitlines()]
    moved = {entry["path"] for entry in log}
    assert all(entry["reason"] and entry["moved_at"] for entry in log)
    after = _tree(hostile)
    assert {k: v for k, v in after.items() if not k.startswith("_quarantine/")} == {
        k: v for k, v in before.items() if k not in moved
    }
    assert {k.split("/", 2)[2]: v for k, v in after.items() if k.startswith("_quarantine/") and "jsonl" not in k} == {
        k: before[k] for k in moved
    }  # moved, byte for byte, under the same relative path
    for run_id in DAMAGED_RUNS:  # a damaged run is moved whole: never visible with part of its rows
        assert not [k for k in after if f"={run_id}/" in k and not k.startswith("_quarantine/")]
    # the lake is clean now, and answers as the reference does, without a warning
    code, out, _ = _main(monkeypatch, capsys, "doctor", "--lake", str(hostile))
    assert code == 0, out
    sql = ["sql", "SELECT run_id, count(*) FROM scores GROUP BY ALL ORDER BY ALL"]
    hostile_answer = _main(monkeypatch, capsys, *sql, "--lake", str(hostile))
    assert hostile_answer == _main(monkeypatch, capsys, *sql, "--lake", str(reference))
    assert hostile_answer[2] == ""
    assert [r[0] for r in fetch(connect(Lake(hostile)), "SELECT run_id FROM runs ORDER BY 1")] == sorted(HEALTHY_RUNS)


@pytest.mark.parametrize("how", ["option", "environment", "below a file"])
def test_a_results_location_that_is_not_a_folder_is_one_line_before_any_work(
    tmp_path: Path, how: str, monkeypatch, capsys
) -> None:
    """`--results FILE` (or $RAGLAKE_RESULTS) was refused only when the first batch was staged, after the inputs
    were read, as "cannot write the staged file FILE/batches/…: Not a directory", which named neither the setting
    nor how to fix it; it is one line before any work, and the lake is untouched."""
    blocker = tmp_path / "results.txt"
    blocker.write_text("not a folder")
    results = blocker / "inner" if how == "below a file" else blocker
    given = ["--results", str(results)] if how != "environment" else []
    if how == "environment":
        monkeypatch.setenv("RAGLAKE_RESULTS", str(results))
    lake = tmp_path / "lake"
    run = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--lake", str(lake), "--quiet", *given]
    code, out, err = _main(monkeypatch, capsys, *run)
    assert code == 2, (out, err)
    said = " ".join(out.split())
    where = "--results" if how != "environment" else "$RAGLAKE_RESULTS"
    assert said.startswith(f"error: the results location {results} ") and where in said, said
    assert ("is a file" if how != "below a file" else f"{blocker} is not a folder") in said
    assert "Traceback" not in out + err and not lake.exists()
    assert blocker.read_text() == "not a folder"
