"""`raglake doctor`: every file of the lake that readers skip or that has no place in it, with the reason
(read-only); and `--quarantine`, which moves them under `<lake>/_quarantine/<timestamp>/` at their own
relative path, with a log (`quarantine.jsonl`: what, why, when). Nothing is ever deleted.

What is a finding: a Parquet file of a table that does not read whole (footer, schema, every row group:
raglake.lake.checks), a file that is no Parquet file of the layout `<table>/<partition>=<value>/<name>.parquet`,
a temp file of a write that never finished and the files of a run never committed (a landing that did
not finish), those two once older than STALE_AFTER (a younger one may be a landing in progress). The
top-level names starting with `_` (`_results`, `_cache`, `_quarantine`) are raglake's places, not examined.

A finding that is one of a run's own files (raglake.lake.checks.own_unit) is quarantined with the whole
run, its runs row first: a run is in the lake whole or not at all, never with a part of its rows."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from raglake.errors import LakeWriteError
from raglake.lake.checks import UNITS, deep_problem, own_unit
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES

STALE_AFTER = dt.timedelta(hours=24)
QUARANTINE = "_quarantine"
LOG = "quarantine.jsonl"


@dataclass(frozen=True)
class Finding:
    """A file readers leave out or that has no place in the lake; `moves`: what quarantining it moves
    (relative paths; for a run's own file, every file of the run, its runs row first)."""

    path: str  # relative to the lake root
    reason: str
    moves: tuple[str, ...] = field(default=())


def _files(lake: Lake) -> Iterator[tuple[str, dict[str, Any]]]:
    """(relative path, fsspec info) of every file under the lake root but raglake's `_` places."""
    root = lake.root.rstrip("/")
    if not lake.fs.isdir(root):
        return
    for path, info in sorted(lake.fs.find(root, detail=True).items()):
        rel = path[len(root) :].lstrip("/")
        if not rel.startswith("_") and info.get("type") != "directory":
            yield rel, info


def _age(info: dict[str, Any], now: dt.datetime) -> dt.timedelta:
    stamp = info.get("mtime") or info.get("created")
    if isinstance(stamp, dt.datetime):
        return now - (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc))
    return now - dt.datetime.fromtimestamp(float(stamp or now.timestamp()), dt.timezone.utc)


def _place(rel: str) -> tuple[str, str, str] | None:
    """(table, partition value, file name) of a path of the layout, else None."""
    parts = rel.split("/")
    if len(parts) != 3 or parts[0] not in TABLES:
        return None
    column, eq, value = parts[1].partition("=")
    return (parts[0], value, parts[2]) if eq and column == TABLES[parts[0]].partition and value else None


def _problem(lake: Lake, rel: str, info: dict[str, Any], committed: set[str], now: dt.datetime) -> str | None:
    place = _place(rel)
    if place is None:
        return "not part of the lake's layout (<table>/<partition>=<value>/<name>.parquet): a foreign file"
    table, value, name = place
    stale = _age(info, now) > STALE_AFTER
    if name.startswith(".") and name.endswith(".parquet.tmp"):
        return f"temp file of a write that never finished (older than {_hours()})" if stale else None
    if not name.endswith(".parquet") or name.startswith("."):
        return "not a Parquet file of the lake: a foreign file"
    if TABLES[table].partition == "run_id" and value not in committed:
        never = f"file of run {value}, never committed: a landing that did not finish (older than {_hours()})"
        return never if stale else None
    return deep_problem(lake.fs, table, f"{lake.root.rstrip('/')}/{rel}", info, local=lake.is_local)


def _hours() -> str:
    return f"{STALE_AFTER.total_seconds() / 3600:g} h"


def examine(lake: Lake, now: dt.datetime | None = None) -> list[Finding]:
    """Every finding in the lake, in path order (reads every Parquet file whole; changes nothing)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    files = dict(_files(lake))
    committed = {rel.rsplit("/", 1)[1].removesuffix(".parquet") for rel in files if _is_runs_file(rel)}
    findings = []
    for rel, info in files.items():
        reason = _problem(lake, rel, info, committed, now)
        if reason:
            findings.append(Finding(rel, reason, _moves(rel, files)))
    return findings


def _is_runs_file(rel: str) -> bool:
    place = _place(rel)
    return place is not None and place[0] == "runs" and place[2].endswith(".parquet") and not place[2].startswith(".")


def _moves(rel: str, files: dict[str, Any]) -> tuple[str, ...]:
    """What quarantining `rel` moves: the file, or (a run's own file) every file of its run, runs row first."""
    place = _place(rel)
    unit = own_unit(place[0], rel) if place and place[2].endswith(".parquet") else None
    if unit is None:
        return (rel,)
    column = "run_id" if place[0] == "runs" else TABLES[place[0]].partition
    if column not in UNITS:
        return (rel,)
    runs_rows = [f for f in files if column == "run_id" and _is_runs_file(f) and f.endswith(f"/{unit}.parquet")]
    own = [f for f in files if (p := _place(f)) and TABLES[p[0]].partition == column and p[1] == unit]
    return tuple(dict.fromkeys([*runs_rows, *own, rel]))


def quarantine(lake: Lake, findings: list[Finding], now: dt.datetime | None = None) -> tuple[str, list[dict]]:
    """Move every finding (with what moves with it) under `_quarantine/<timestamp>/`, each at its own
    relative path, and write the log there; returns the folder and the log's entries. Never deletes."""
    now = now or dt.datetime.now(dt.timezone.utc)
    root = lake.root.rstrip("/")
    folder, n = f"{QUARANTINE}/{now:%Y%m%dT%H%M%SZ}", 1
    while lake.fs.exists(f"{root}/{folder}"):
        n += 1
        folder = f"{QUARANTINE}/{now:%Y%m%dT%H%M%SZ}-{n}"
    log: list[dict] = []
    moved: set[str] = set()
    try:
        for finding in findings:
            for rel in finding.moves:
                if rel in moved:
                    continue
                why = finding.reason if rel == finding.path else f"moved with {finding.path} (its run goes whole)"
                target = f"{root}/{folder}/{rel}"
                lake.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
                lake.fs.mv(f"{root}/{rel}", target)
                moved.add(rel)
                log.append({"path": rel, "reason": why, "moved_at": dt.datetime.now(dt.timezone.utc).isoformat()})
    except OSError as e:
        raise LakeWriteError(f"cannot move a file into {root}/{folder}: {e.strerror or e}") from None
    finally:
        if log:
            lake.fs.pipe_file(f"{root}/{folder}/{LOG}", "".join(json.dumps(e) + "\n" for e in log).encode())
    return f"{root}/{folder}", log
