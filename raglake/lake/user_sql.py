"""A user's own SQL over the lake (`raglake sql`, `raglake.Lake.sql`): only queries run, and any other
statement is refused, named for what it does; DuckDB's errors are passed on without its advice to change
a setting or to install or load an extension (none of which can run on a lake connection); the rows come
a batch at a time, and DuckDB's `con.interrupt()` ends a running query with QueryInterrupted."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import duckdb
import pyarrow as pa

from raglake.errors import ConfigError, RaglakeError

# what `raglake sql` runs: queries (WITH, DESCRIBE, SHOW, SUMMARIZE, VALUES, PIVOT … IN parse as SELECT) and
# EXPLAIN of one
READ_ONLY = (duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN)
BATCH_ROWS = 10_000
_LEAD = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.S)  # whitespace and comments before the first word
_EXPLAIN = re.compile(r"EXPLAIN\b\s*(?:ANALY[SZ]E\b)?\s*(?:\([^)]*\))?", re.IGNORECASE)
# a statement that is not a query, by its first words (or DuckDB's name of its type): what it does
_STATEMENTS = tuple(
    (re.compile(rf"(?:{words})\b", re.IGNORECASE), does)
    for words, does in (
        (r"FORCE\s+INSTALL|INSTALL", " (installs an extension)"),
        (r"UPDATE\s+EXTENSIONS", " (updates extensions)"),
        (r"LOAD", " (loads an extension)"),
        (r"EXPORT(?:\s+DATABASE)?", " (writes the database to files)"),
        (r"IMPORT(?:\s+DATABASE)?", " (reads a database from files)"),
        (r"COPY\s+FROM\s+DATABASE", " (copies a database into another)"),
        (r"COPY", " (copies between a table and a file)"),
        (r"ATTACH", " (opens another database)"),
        (r"DETACH", " (closes an attached database)"),
        (r"USE", " (changes the default database)"),
        (r"SET|RESET", " (changes a setting)"),
        (r"PRAGMA", " (runs a pragma: a setting, a table function or an import)"),
        (r"CALL", " (calls a table function: query it with SELECT * FROM instead)"),
        (r"(?:FORCE\s+)?CHECKPOINT", " (writes the database to disk)"),
        (r"INSERT", " (adds rows)"),
        (r"UPDATE", " (changes rows)"),
        (r"DELETE|TRUNCATE", " (deletes rows)"),
        (r"MERGE(?:\s+INTO)?", " (changes rows)"),
        (r"CREATE", " (creates a table, view, macro or other object)"),
        (r"DROP|DEALLOCATE", " (drops an object)"),
        (r"ALTER|COMMENT", " (changes an object)"),
        (r"VACUUM|ANALYZE", " (rebuilds statistics or storage)"),
        (r"BEGIN|START|COMMIT|END|ROLLBACK|ABORT|TRANSACTION", " (begins or ends a transaction)"),
        (r"PREPARE", " (prepares a statement)"),
        (r"EXECUTE", " (runs a prepared statement)"),
        (
            r"PIVOT|MULTI",  # a PIVOT that must find its columns first is several statements (type MULTI)
            " without an IN list of its values (DuckDB runs it as several statements; name them: ON column IN (…))",
        ),
    )
)
# DuckDB's advice that cannot be followed here, a line of its message each
_ADVICE = re.compile(
    r"\b(?:SET|RESET|INSTALL|LOAD|PRAGMA|ATTACH)\b|temp_directory|launch the database|launched in in-memory"
    r"|unused blocks|installing and loading|possible solutions|^\s*see also|for more info",
    re.IGNORECASE,
)
_EXTENSION = re.compile(r"exists in the (\w+) extension|install the required extension '?(\w+)")


class QueryInterrupted(RaglakeError):
    """The query was ended by `con.interrupt()` (Ctrl-C or a time-out, which the caller knows)."""


def _type(statement: duckdb.Statement) -> duckdb.StatementType | None:
    try:
        return statement.type
    except ValueError:  # a type DuckDB's Python enum lacks ("UPDATE EXTENSIONS" is 29): not a query either
        return None


def _article(name: str) -> str:
    return "an" if name[:1] in "AEIOU" and not name.startswith("USE") else "a"


def _named(text: str, kind: duckdb.StatementType | None) -> str:
    """'an INSTALL statement (installs an extension)': what the statement is called by its first words, or
    by DuckDB's name of its type where they are not in _STATEMENTS (WITH … INSERT)."""
    at = _LEAD.match(text).end()
    for pattern, does in _STATEMENTS:
        if m := pattern.match(text, at):
            name = " ".join(m.group(0).upper().split())
            return f"{_article(name)} {name} statement{does}"
    name = kind.name.replace("_", " ") if kind is not None else (text[at:].split() or ["unknown"])[0].upper()
    does = next((d for p, d in _STATEMENTS if p.fullmatch(name)), "")
    return f"{_article(name)} {name} statement{does}"


def _refusal(statement: duckdb.Statement) -> str | None:
    """What refuses the statement ('an INSTALL statement (installs an extension)'), or None for a query or
    an EXPLAIN of one (EXPLAIN ANALYZE runs what it explains)."""
    kind = _type(statement)
    if kind == duckdb.StatementType.EXPLAIN:
        text = statement.query
        explain = _EXPLAIN.match(text, _LEAD.match(text).end())
        inner = text[explain.end() :] if explain else ""
        refused = next(filter(None, map(_refusal, duckdb.extract_statements(inner) if inner.strip() else [])), None)
        words = "EXPLAIN ANALYZE" if explain and "ANALY" in explain.group(0).upper() else "EXPLAIN"
        return f"{_article(words)} {words} of {refused}" if refused else None
    return None if kind in READ_ONLY else _named(statement.query, kind)


def check_read_only(text: str) -> None:
    """Refuse SQL that is not a query: every statement must be a SELECT (WITH, DESCRIBE, SHOW, …) or an
    EXPLAIN of one, as DuckDB's own parser classifies it; a refusal names the statement and what it does."""
    try:
        statements = duckdb.extract_statements(text)
        refusals = [_refusal(s) for s in statements]
    except duckdb.Error as e:
        raise ConfigError(sql_error(e)) from None
    if not statements:
        raise ConfigError("no SQL statement given")
    for i, refused in enumerate(refusals, 1):
        if refused:
            where = f", statement {i} of {len(refusals)}" if len(refusals) > 1 else ""
            raise ConfigError(
                f"refused {refused}{where}: the lake is read-only to queries; "
                f"`raglake sql` runs SELECT, WITH, DESCRIBE, SHOW and EXPLAIN over the lake views"
            )


def sql_error(e: BaseException) -> str:
    """DuckDB's message without its advice to SET, INSTALL, LOAD or PRAGMA anything (refused here), and
    with what can be done instead where there is something."""
    first, *rest = str(e).strip().split("\n")
    notes = []
    if ext := _EXTENSION.search(str(e)):
        name = ext.group(1) or ext.group(2)
        note = f"the query needs DuckDB's {name} extension, which `raglake sql` does not install or load"
        if "install" in first.lower():  # DuckDB tried to install it: its own lines only say why it could not
            return f"SQL error: {note}"
        notes.append(note)
    if isinstance(e, duckdb.OutOfMemoryException) or first.startswith("Out of Memory Error"):
        notes.append(
            "the query needs more memory than DuckDB may use here (`raglake sql` cannot change its settings): "
            "select fewer rows or columns, or aggregate before sorting or joining"
        )
    kept = [line for line in rest if line.strip() and not _ADVICE.search(line)]
    return "SQL error: " + "\n".join([first, *kept, *notes])


@contextlib.contextmanager
def _duckdb_errors() -> Iterator[None]:
    """DuckDB's errors, and those it raises through pyarrow's reader while rows stream, as ConfigError;
    an interrupted query as QueryInterrupted."""
    try:
        yield
    except duckdb.InterruptException:
        raise QueryInterrupted("query interrupted") from None
    except duckdb.Error as e:
        raise ConfigError(sql_error(e)) from None
    except (pa.ArrowException, OSError) as e:  # the reader's: DuckDB's message inside
        if str(e).startswith("INTERRUPT Error"):
            raise QueryInterrupted("query interrupted") from None
        raise ConfigError(sql_error(e)) from None


def stream_sql(
    con: duckdb.DuckDBPyConnection, text: str, *, limit: int | None = None, batch_rows: int = BATCH_ROWS
) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """A user's read-only query (see `check_read_only`): the schema of its rows and the rows, a batch at a
    time, never held whole; several statements run in order and the last one's rows come. `limit`: at most
    that many rows are computed (a LIMIT around the query: DuckDB stops early, or keeps only a sort's top)."""
    check_read_only(text)
    with _duckdb_errors():
        relation = con.sql(text)
        if relation is None:
            return pa.schema([]), iter(())
        if limit is not None:
            relation = relation.limit(limit)
        reader = relation.to_arrow_reader(batch_rows)
    return reader.schema, _batches(reader)


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    with contextlib.closing(reader):
        while True:
            with _duckdb_errors():  # only around DuckDB's work: an error of the caller's is its own
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
            yield batch


def run_sql(con: duckdb.DuckDBPyConnection, text: str) -> pa.Table:
    """A user's own read-only query over the lake views, every row (see `stream_sql`)."""
    schema, batches = stream_sql(con, text)
    return pa.Table.from_batches(list(batches), schema)
