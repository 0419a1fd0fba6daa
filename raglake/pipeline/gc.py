"""`raglake gc`: what the results location (raglake.pipeline.staging) holds that no re-run or resume can use.

What a re-run or a resume needs there. Nothing, to be right: every staged file is found by its content key
and checked against its sha256 before use, and whatever is missing or fails the check is made again. What
cost money or a live service's time is kept elsewhere: paid judge calls in the lake's `judge_calls` (the
ledger a resumed run reads), a live target's captures in the capture journal (`_cache/captures/`). Staged
files only spare work:
- a resume (the same `--run-id` after a crash) finds its run's staged cases, captures, judge outcomes
  (`judged/<run>/`) and scored batches, and a landing in progress reads its scored batches;
- a re-run of the same inputs (a deterministic target) finds the cases, captures and scored batches of the
  earlier run by content key; `metaeval` reads `metaeval/<id>/` until its rows land.

So gc removes:
- what can never be used again: the judge outcomes of a run that is committed (a committed run is never
  resumed; `rescore` reads the ledger), the staged rows of a meta-evaluation whose rows are in the lake;
- what a killed write left, once older than MIN_AGE (a write in progress is younger): temp files, a
  scored batch without its `_done`, captures without their `.sha256` marker (never reused);
- cached work not written or reused for `keep` (the default, KEEP, spares a week of re-runs and resumes;
  each reuse touches the file, so this is "unused for", not "older than").
Anything else in the folder is not raglake's and is left alone. Nothing younger than MIN_AGE is removed."""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from raglake.errors import LakeWriteError
from raglake.lake.landing import is_committed
from raglake.lake.store import Lake
from raglake.pipeline.staging import Store

KEEP = dt.timedelta(days=7)
MIN_AGE = dt.timedelta(hours=1)
_TEMP = re.compile(r"^\.[0-9a-f]{12}\.tmp$")


@dataclass(frozen=True)
class Garbage:
    """One thing gc removes: a file or a folder (removed whole), relative to the results location."""

    path: str
    bytes: int
    why: str


def _unit(rel: str) -> str | None:
    """The staged unit a file belongs to (removed together), or None for a file that is not raglake's."""
    parts = rel.split("/")
    if parts[0] in ("judged", "metaeval") and len(parts) >= 3:
        return "/".join(parts[:2])
    if parts[0] == "scored" and len(parts) == 4:
        return "/".join(parts[:3])
    if parts[0] == "captures" and len(parts) == 3 and parts[2].endswith((".jsonl", ".sha256")):
        return f"captures/{parts[1]}/{parts[2].rsplit('.', 1)[0]}"
    if parts[0] == "batches" and len(parts) == 3 and parts[2].endswith(".cases.jsonl"):
        return rel
    return None


def _when(info: dict[str, Any]) -> dt.datetime:
    stamp = info.get("mtime") or info.get("created") or 0
    if isinstance(stamp, dt.datetime):
        return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromtimestamp(float(stamp), dt.timezone.utc)


def _why(
    unit: str, files: dict[str, dict[str, Any]], lake: Lake, landed: set[str], now: dt.datetime, keep: dt.timedelta
) -> str | None:
    """Why a unit goes (None: it stays). `files`: its files, relative path -> info."""
    used = now - max(_when(info) for info in files.values())
    if used < MIN_AGE:
        return None
    kind, _, name = unit.partition("/")
    if kind == "judged" and is_committed(lake, name):
        return f"judge outcomes of run {name}, which is committed (a committed run is never resumed)"
    if kind == "metaeval" and name in landed:
        return f"staged rows of meta-evaluation {name}, which are in the lake"
    if kind == "scored" and not any(f.endswith("/_done") for f in files):
        return "a scored batch that was never finished (no _done): its writer was killed"
    if kind == "captures" and not any(f.endswith(".sha256") for f in files):
        return "captures without their .sha256 marker (a killed write, or staged by an older raglake): never reused"
    if used > keep:
        days = used.total_seconds() / 86400
        return f"not written or reused for {days:.1f} days (kept: {keep.total_seconds() / 86400:g})"
    return None


def collect(results: str, lake: Lake, *, keep: dt.timedelta = KEEP, now: dt.datetime | None = None) -> list[Garbage]:
    """What gc removes from the results location `results` (a folder or fsspec URL) of `lake`, in path order."""
    now = now or dt.datetime.now(dt.timezone.utc)
    store = Store(results)
    root = store.root.rstrip("/")
    if not store.fs.isdir(root):
        return []
    found = {p[len(root) :].lstrip("/"): info for p, info in store.fs.find(root, detail=True).items()}
    units: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    garbage = []
    for rel, info in sorted(found.items()):
        if info.get("type") == "directory":
            continue
        if _TEMP.match(rel.rsplit("/", 1)[-1]):
            if now - _when(info) > MIN_AGE:
                garbage.append(Garbage(rel, int(info.get("size") or 0), "temp file of a write that never finished"))
            continue
        unit = _unit(rel)
        if unit is not None:
            units[unit][rel] = info
    landed = {f.replace("\\", "/").rsplit("/", 2)[-2].partition("=")[2] for f in lake.listed("metaeval")}
    for unit, files in sorted(units.items()):
        why = _why(unit, files, lake, landed, now, keep)
        if why is None:
            continue
        if unit.startswith(("judged/", "metaeval/", "scored/")):  # a folder, removed whole
            garbage.append(Garbage(unit, sum(int(i.get("size") or 0) for i in files.values()), why))
        else:
            garbage += [Garbage(f, int(i.get("size") or 0), why) for f, i in files.items()]
    return sorted(garbage, key=lambda g: g.path)


def remove(results: str, garbage: list[Garbage]) -> None:
    """Delete what `collect` found (a folder with everything in it), then the folders it left empty."""
    store = Store(results)
    root = store.root.rstrip("/")
    try:
        for g in garbage:
            if store.fs.exists(f"{root}/{g.path}"):
                store.fs.rm(f"{root}/{g.path}", recursive=True)
        for g in garbage:
            folder = f"{root}/{g.path}".rsplit("/", 1)[0]
            while folder != root and store.fs.isdir(folder) and not store.fs.ls(folder):
                store.fs.rmdir(folder)
                folder = folder.rsplit("/", 1)[0]
    except OSError as e:
        raise LakeWriteError(f"cannot remove from the results location {root}: {e.strerror or e}") from None
