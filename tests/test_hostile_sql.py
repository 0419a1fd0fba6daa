"""`raglake sql` under hostile use (issue 25): a refused statement is named for what it is, with its
article; DuckDB's advice to change settings or install extensions (which `raglake sql` refuses) is not
passed on; a query stops on Ctrl-C or after --timeout with one line and no traceback; results are
streamed (the table fetches only the rows it prints, --json writes a batch at a time)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from raglake.errors import ConfigError
from raglake.lake.query import run_sql, stream_sql
from raglake.lake.store import Lake
from raglake.pipeline.lakes import connect_lake
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land

GOLDEN, TARGET = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
# minutes of two threads' work, and no memory to speak of: the left side streams through the join
SLOW = "SELECT sum(a.range * b.range) AS s FROM range(1000000000) a, range(100000) b"


@pytest.fixture(scope="module")
def lake_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("hostile-sql") / "lake")
    land(path, GOLDEN, TARGET, "r-one")
    return path


@pytest.fixture(scope="module")
def con(lake_path: str) -> duckdb.DuckDBPyConnection:
    return connect_lake(Lake(lake_path))


REFUSED = [
    ("INSTALL httpfs", "an INSTALL statement (installs an extension)"),
    ("FORCE INSTALL httpfs", "a FORCE INSTALL statement (installs an extension)"),
    ("/* quietly */ -- a comment\n  install httpfs", "an INSTALL statement (installs an extension)"),
    ("LOAD httpfs", "a LOAD statement (loads an extension)"),
    ("UPDATE EXTENSIONS", "an UPDATE EXTENSIONS statement (updates extensions)"),
    ("EXPORT DATABASE '/tmp/raglake-never'", "an EXPORT DATABASE statement (writes the database to files)"),
    ("IMPORT DATABASE '/tmp/raglake-never'", "an IMPORT DATABASE statement (reads a database from files)"),
    ("ATTACH '/tmp/raglake-never.duckdb' AS other", "an ATTACH statement (opens another database)"),
    ("DETACH other", "a DETACH statement"),
    ("USE memory", "a USE statement (changes the default database)"),
    ("SET threads = 1", "a SET statement (changes a setting)"),
    ("RESET threads", "a RESET statement (changes a setting)"),
    ("PRAGMA enable_external_access", "a PRAGMA statement"),
    ("CALL pragma_version()", "a CALL statement"),
    ("CHECKPOINT", "a CHECKPOINT statement"),
    ("INSERT INTO runs SELECT * FROM runs", "an INSERT statement (adds rows)"),
    ("UPDATE runs SET run_id = 'x'", "an UPDATE statement (changes rows)"),
    ("DELETE FROM runs", "a DELETE statement (deletes rows)"),
    ("TRUNCATE runs", "a TRUNCATE statement (deletes rows)"),
    ("ALTER TABLE runs ADD COLUMN y INT", "an ALTER statement"),
    ("CREATE TABLE t AS SELECT 1 AS x", "a CREATE statement"),
    ("DROP VIEW scores", "a DROP statement"),
    ("ANALYZE", "an ANALYZE statement"),
    ("VACUUM", "a VACUUM statement"),
    ("BEGIN", "a BEGIN statement"),
    ("PREPARE p AS SELECT 1", "a PREPARE statement"),
    ("COPY (SELECT 1) TO '/tmp/raglake-never.csv'", "a COPY statement"),
    ("EXPLAIN ANALYZE COPY (SELECT 1) TO '/tmp/raglake-never.csv'", "an EXPLAIN ANALYZE of a COPY statement"),
    ("SELECT 1; DROP VIEW scores", "a DROP statement (drops an object), statement 2 of 2"),
    ("PIVOT runs ON target_name USING count(*)", "a PIVOT statement without an IN list"),
]


@pytest.mark.parametrize("statement, named", REFUSED, ids=[r[0][:30] for r in REFUSED])
def test_a_refused_statement_is_named_with_its_article(con: duckdb.DuckDBPyConnection, statement: str, named: str):
    with pytest.raises(ConfigError) as refused:
        run_sql(con, statement)
    message = str(refused.value)
    assert message.startswith(f"refused {named}"), message
    assert "read-only to queries" in message
    assert not re.search(r"\ba (?!USE\b)[AEIOU]", message), message  # "a EXPORT", "a INSTALL", "a UPDATE"


def test_an_explicit_pivot_is_a_query(con: duckdb.DuckDBPyConnection) -> None:
    assert run_sql(con, "PIVOT (SELECT 1 AS a, 2 AS b) ON a IN (1) USING sum(b)").num_rows == 1


ADVICE = re.compile(r"\b(?:SET|RESET|INSTALL|LOAD|PRAGMA|ATTACH)\b")


def test_duckdb_advice_to_change_settings_is_not_passed_on() -> None:
    """An out-of-memory error advises SET threads/memory_limit/temp_directory: none of it can run here."""
    con = duckdb.connect()
    con.sql("SET memory_limit = '30MB'")
    with pytest.raises(ConfigError) as oom:
        run_sql(con, "SELECT list(range) AS l FROM range(100000000)")
    message = str(oom.value)
    assert message.startswith("SQL error: Out of Memory Error: "), message
    assert not ADVICE.search(message) and "temp_directory" not in message, message
    assert "more memory than DuckDB may use here" in message


@pytest.mark.parametrize(
    "query, extension",
    [("SELECT st_point(1, 2)", "spatial"), ("SELECT * FROM sqlite_scan('x.db', 't')", "sqlite_scanner")],
)
def test_an_extension_is_not_offered_to_install(con: duckdb.DuckDBPyConnection, query: str, extension: str) -> None:
    with pytest.raises(ConfigError) as missing:
        run_sql(con, query)
    message = str(missing.value)
    assert not ADVICE.search(message) and "install" not in message.replace("not install", ""), message
    assert f"DuckDB's {extension} extension, which `raglake sql` does not install or load" in message


def test_a_catalog_error_keeps_its_suggestion(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(ConfigError, match=r'(?s)Table with name runz does not exist!.*Did you mean "runs"'):
        run_sql(con, "SELECT * FROM runz")


def test_the_table_fetches_only_the_rows_it_prints(con: duckdb.DuckDBPyConnection) -> None:
    schema, batches = stream_sql(con, "SELECT range AS i FROM range(10000000)", limit=1001)
    assert schema.names == ["i"]
    assert sum(b.num_rows for b in batches) == 1001
    _, batches = stream_sql(con, "SELECT range AS i FROM range(2500000)")  # every row, a batch at a time
    sizes = [b.num_rows for b in batches]
    assert sum(sizes) == 2500000 and max(sizes) < 2500000


def _raglake(*args: str) -> list[str]:
    return [sys.executable, "-m", "raglake", *args]


def test_sql_table_says_there_are_more_rows(lake_path: str) -> None:
    done = subprocess.run(
        _raglake("sql", "SELECT range AS i FROM range(5000000)", "--lake", lake_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shown = re.findall(r"^│\s*(\d+)\s*│$", done.stdout, flags=re.M)
    assert shown == [str(i) for i in range(1000)]
    assert "the first 1,000 rows shown; there are more" in done.stdout


def test_sql_json_streams_every_row_in_order(lake_path: str) -> None:
    done = subprocess.run(
        _raglake("sql", "--json", "SELECT range AS i, 'case-' || range AS c FROM range(300000)", "--lake", lake_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 300000
    assert json.loads(lines[0]) == {"i": 0, "c": "case-0"} and json.loads(lines[-1]) == {
        "i": 299999,
        "c": "case-299999",
    }


def test_sql_timeout_stops_the_query_with_one_line(lake_path: str) -> None:
    done = subprocess.run(
        _raglake("sql", "--timeout", "1", SLOW, "--lake", lake_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout.strip() == "error: query timed out after 1 s (--timeout)", done.stdout
    assert "Traceback" not in done.stderr, done.stderr


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_ctrl_c_interrupts_the_query(lake_path: str) -> None:
    started = subprocess.run(  # what starting the command and opening the lake cost, without a query
        _raglake("sql", "SELECT 1", "--lake", lake_path), cwd=ROOT, capture_output=True, timeout=120, check=True
    )
    assert started.returncode == 0
    proc = subprocess.Popen(
        _raglake("sql", "--timeout", "0", SLOW, "--lake", lake_path),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the query is running once the process has used far more CPU than starting it takes (~1 s)
        deadline = time.monotonic() + 120
        while _cpu_seconds(proc.pid) < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, out + err
    assert out.strip() == "error: query interrupted by SIGINT", out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
