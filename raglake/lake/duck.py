"""Every DuckDB connection raglake opens over a lake: its spill folder is one of its own in the system's
temporary folder, never `.tmp` in the working folder (DuckDB's default for an in-memory database: a query
past the memory limit would write there), and a connection may be given a memory limit of its own."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile

import duckdb

from raglake.lake.store import Lake

# the summaries a run prints and publishes once it has landed (`raglake run`'s tables, the flow's artifacts) run
# in the process that holds the run: capped, DuckDB spills instead of growing that process past its plateau
# (issue 29: the 1M run's peak was publish_summary's +500-580 MiB; NOTES, "Scale and speed")
AFTER_RUN_MEMORY = "256MB"


_SPILL_FOLDERS: list[str] = []  # this process's, removed at its exit if a connection was never closed


def spill_folder() -> str:
    """A path no one else uses, under the system's temporary folder: DuckDB creates it on its first spill and
    removes it (and what it wrote there) when the connection closes; what a connection left open leaves is
    removed when the process exits (atexit: the CLI runs the handlers before its os._exit, which skips
    DuckDB's own clean-up)."""
    folder = os.path.join(tempfile.gettempdir(), f"raglake-duckdb-{os.getpid()}-{secrets.token_hex(6)}")
    if not _SPILL_FOLDERS:
        atexit.register(_remove_spill_folders)
    _SPILL_FOLDERS.append(folder)
    return folder


def _remove_spill_folders() -> None:
    for folder in _SPILL_FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)  # most were never made: DuckDB makes one on its first spill


def new_connection(lake: Lake, *, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that reads `lake`'s filesystem and spills into a folder of its own; `memory_limit`
    (DuckDB's form, '256MB'): its cap, else DuckDB's default (80% of the machine's memory)."""
    config = {"temp_directory": spill_folder()}
    if memory_limit is not None:
        config["memory_limit"] = memory_limit
    con = duckdb.connect(config=config)
    if not lake.is_local:
        con.register_filesystem(lake.fs)
    return con
