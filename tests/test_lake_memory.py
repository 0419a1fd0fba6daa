"""DuckDB's memory over the lake: every connection spills into a folder of its own under the system's temporary
folder (never `.tmp` in the working folder, DuckDB's default for an in-memory database), removed when it closes;
a connection may be capped (raglake.lake.duck.AFTER_RUN_MEMORY for the summaries a run prints and publishes), and
a capped connection answers as an uncapped one does."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import pytest

from raglake.lake.duck import AFTER_RUN_MEMORY
from raglake.lake.query import fetch, scalar
from raglake.pipeline import lakes
from raglake.pipeline.lakes import open_lake
from raglake.report.artifacts import summary_markdown, summary_table
from tests.lakekit import MINI_GOLDEN, MINI_REPLAY, land, spy_on_open_lake

# a sort of 2M strings of ~60 bytes: far more than 64 MB, so DuckDB must spill to finish it
SPILLING_SORT = (
    "SELECT count(*), sum(h) FROM (SELECT hash(i)::VARCHAR || repeat('x', 40) AS s, hash(i) AS h "
    "FROM range(2000000) AS t(i) ORDER BY s)"
)


def _spills(folder: str, query) -> tuple[object, bool]:
    """The query's answer, and whether anything appeared in `folder` while it ran (watched every 10 ms)."""
    seen, done = [], threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(os.path.isdir(folder) and bool(os.listdir(folder)))
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        return query(), any(seen)
    finally:
        done.set()
        watcher.join()


@pytest.fixture
def lake(tmp_path: Path) -> str:
    root = str(tmp_path / "lake")
    land(root, MINI_GOLDEN, MINI_REPLAY, "r-one")
    land(root, MINI_GOLDEN, MINI_REPLAY, "r-two", minutes=1)
    return root


def test_a_capped_connection_spills_into_its_own_folder_never_the_working_one(lake, tmp_path, monkeypatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    q = open_lake(lake, memory_limit="64MB")
    folder = scalar(q.con, "SELECT current_setting('temp_directory')")
    assert Path(folder).parent == Path(tempfile.gettempdir()) and Path(folder).name.startswith("raglake-duckdb-")
    assert scalar(q.con, "SELECT current_setting('memory_limit')").replace(" ", "") in ("61.0MiB", "64.0MB")
    answer, spilled = _spills(folder, lambda: fetch(q.con, SPILLING_SORT))
    assert answer[0][0] == 2_000_000 and spilled  # it spilled, into its own folder
    assert list(work.iterdir()) == []  # no .tmp (nor anything else) where the user stands
    q.close()
    assert not os.path.exists(folder)  # DuckDB made it and took it away


def test_an_uncapped_connection_spills_into_its_own_folder_too(lake, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_lake(lake) as q:
        folder = scalar(q.con, "SELECT current_setting('temp_directory')")
        other = scalar(open_lake(lake).con, "SELECT current_setting('temp_directory')")
    assert Path(folder).name.startswith("raglake-duckdb-") and folder != other  # one folder a connection
    assert Path(folder).parent == Path(tempfile.gettempdir())


def test_a_closed_connection_answers_nothing(lake) -> None:
    q = open_lake(lake)
    q.close()
    with pytest.raises(Exception, match="(?i)closed"):
        q.runs()


def test_the_summaries_under_the_after_run_cap_equal_those_without(lake) -> None:
    with open_lake(lake, memory_limit=AFTER_RUN_MEMORY) as capped, open_lake(lake) as free:
        assert summary_table(capped, "r-two") == summary_table(free, "r-two") != []
        assert summary_markdown(capped, "r-two", "r-one") == summary_markdown(free, "r-two", "r-one")
        assert capped.compare("r-one", "r-two") == free.compare("r-one", "r-two")


@pytest.mark.parametrize("tiny", ["2MB", "16MB"])  # the lake's views cannot be made / the summary cannot finish
def test_work_duckdb_cannot_finish_within_the_cap_runs_again_without_it(lake, monkeypatch, tiny) -> None:
    with pytest.raises(duckdb.OutOfMemoryException), open_lake(lake, memory_limit=tiny) as q:
        summary_markdown(q, "r-two", "r-one")  # the premise: DuckDB gives up within that cap
    monkeypatch.setattr(lakes, "AFTER_RUN_MEMORY", tiny)
    opened = spy_on_open_lake(monkeypatch, lakes)
    calls: list[str | None] = []

    def work(q):
        calls.append(opened[-1][0])
        return summary_markdown(q, "r-two", "r-one")

    with open_lake(lake) as free:
        assert lakes.after_run(lake, work) == summary_markdown(free, "r-two", "r-one")
    assert [limit for limit, _ in opened] == [tiny, None]  # capped first, then without a cap
    assert calls == ([tiny, None] if tiny == "16MB" else [None])  # at 2 MB, opening the lake gave up already
    for _, q in opened:
        if q is not None:  # both connections closed
            with pytest.raises(duckdb.ConnectionException):
                q.runs()


def test_the_command_lines_summaries_print_once_when_the_cap_is_too_small(lake, monkeypatch) -> None:
    from typer.testing import CliRunner

    from raglake.cli import app, jobs
    from raglake.cli.common import print_runs

    args = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--lake", lake, "--metrics", "mrr_at_k"]
    args += ["--orchestration", "in-process"]
    fine = CliRunner().invoke(app, [*args, "--run-id", "r-fine"])
    monkeypatch.setattr(lakes, "AFTER_RUN_MEMORY", "16MB")  # the lake opens; its summaries cannot finish
    printing = []
    monkeypatch.setattr(jobs, "print_runs", lambda q, run_ids: printing.append(1) or print_runs(q, run_ids))
    retried = CliRunner().invoke(app, [*args, "--run-id", "r-retried"])
    assert fine.exit_code == retried.exit_code == 0, retried.output
    assert len(printing) == 2  # begun under the cap, then again without it: what the first try printed is held
    assert retried.output.count("landed run(s): r-retried") == 1 and retried.output.count("verdict") == 1
    assert (
        retried.output.replace("r-retried", "ID").splitlines()[-1]
        == fine.output.replace("r-fine", "ID").splitlines()[-1]
    )


def test_what_a_first_try_printed_before_duckdb_gave_up_is_never_shown(lake, monkeypatch) -> None:
    from typer.testing import CliRunner

    from raglake.cli import app, jobs
    from raglake.cli.common import print_runs

    tries = []

    def flaky(q, run_ids) -> None:
        tries.append(1)
        if len(tries) == 1:
            jobs.render.console.print("half of a table")
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")
        print_runs(q, run_ids)

    monkeypatch.setattr(jobs, "print_runs", flaky)
    args = ["run", "--golden", MINI_GOLDEN, "--target", MINI_REPLAY, "--lake", lake, "--metrics", "mrr_at_k"]
    done = CliRunner().invoke(app, [*args, "--orchestration", "in-process", "--run-id", "r-flaky"])
    assert done.exit_code == 0, done.output
    assert len(tries) == 2 and "half of a table" not in done.output
    assert done.output.count("landed run(s): r-flaky") == 1


def test_a_connection_left_open_leaves_no_spill_folder_when_the_command_line_exits(lake) -> None:
    """The command line ends with os._exit after running the atexit handlers (raglake.cli): DuckDB's own clean-up
    never runs there, so a connection never closed left its raglake-duckdb-* folder in the temporary folder."""
    script = f"""
import atexit, os, sys
from raglake.lake.query import fetch, scalar
from raglake.pipeline.lakes import open_lake
q = open_lake({lake!r}, memory_limit="64MB")
folder = scalar(q.con, "SELECT current_setting('temp_directory')")
fetch(q.con, {SPILLING_SORT!r})
print(folder, os.path.isdir(folder), flush=True)
atexit._run_exitfuncs()
os._exit(0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folder, spilled = done.stdout.split()
    assert spilled == "True" and not os.path.exists(folder)
