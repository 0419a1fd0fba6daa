"""Reading inputs in bulk (issue 29, item 2): a golden set and a capture file validated into spools by the
bulk path (`raglake.golden.load_golden` / `spool_captures`: raglake.columnar.ingest) against the per-record
path it replaces (one pydantic model per record: `iter_records` → `validate_record` → `Spool.append`, plus the
golden set's content hash), on the same files, in the same process, alternating.

    python benchmarks/ingest.py [--cases 20000] [--repeat 3] [--keep DIR]

The files are benchmarks/scale.py's `write_replay` (seeded; 10 retrieved chunks a capture). Each round times
both paths on both files (best and median of --repeat are printed, with MB/s and the ratio per-record / bulk);
before timing, the two paths' spools are compared byte for byte (canonical lines, source lines, ids) and the
content hashes equal (exit status 1 otherwise). The load average is printed before and after: the machine is
shared. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _common import ROOT, work_folder

sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from scale import write_replay  # noqa: E402

from raglake.golden import load_golden, spool_captures  # noqa: E402
from raglake.records import validate_record  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402
from raglake.spool import Spool, iter_records  # noqa: E402


def per_record(path: Path, model: type, key: str) -> tuple[Spool, str | None]:
    """The path the bulk reader replaces: a model per record, its dump spooled and hashed."""
    spool: Spool = Spool(model, key)
    h = hashlib.sha256()
    for record in iter_records(path):
        item = validate_record(record, model, path)
        spool.append(item, record.line)
        if model is GoldenCase:
            h.update(json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode() + b"\n")
    return spool, h.hexdigest()[:16] if model is GoldenCase else None


def bulk(path: Path, model: type) -> tuple[Spool, str | None]:
    """The bulk path (a capture file has no content hash of its dumps: None)."""
    if model is GoldenCase:
        golden = load_golden(path)
        return golden.cases, golden.content_hash
    return spool_captures(path)[0], None


def same(a: Spool, b: Spool) -> bool:
    return (
        a.raw(0, len(a)) == b.raw(0, len(b))
        and [a.line(i) for i in range(len(a))] == [b.line(i) for i in range(len(b))]
        and a.ids == b.ids
    )


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args(argv)
    pa.array([0])  # pyarrow's one-time import of pandas, outside the timings
    with work_folder(args.keep, "raglake-bench-ingest-") as folder:
        paths = write_replay(folder, args.cases, seed=29)
        files = {
            "golden set": (paths["golden.jsonl"], GoldenCase, "id"),
            "capture file": (paths["captures.jsonl"], Capture, "case_id"),
        }
        print(f"ingest: {args.cases:,} cases; load {os.getloadavg()[0]:.2f} before")
        ok = True
        for name, (path, model, key) in files.items():
            theirs, hash_theirs = per_record(path, model, key)
            ours, hash_ours = bulk(path, model)
            agree = same(ours, theirs) and hash_ours == hash_theirs
            ok &= agree
            size = path.stat().st_size / 2**20
            print(f"  {name}: {size:.1f} MiB; the spools and hash byte for byte: {'yes' if agree else 'NO'}")
        for name, (path, model, key) in files.items():
            times: dict[str, list[float]] = {"per-record": [], "bulk": []}
            for _ in range(args.repeat):
                times["per-record"].append(timed(per_record, path, model, key))
                times["bulk"].append(timed(bulk, path, model))
            size = path.stat().st_size / 2**20
            row = {label: (min(t), statistics.median(t)) for label, t in times.items()}
            print(
                f"  {name}: per-record {row['per-record'][0]:.2f} / {row['per-record'][1]:.2f} s "
                f"({size / row['per-record'][0]:.0f} MiB/s), bulk {row['bulk'][0]:.2f} / {row['bulk'][1]:.2f} s "
                f"({size / row['bulk'][0]:.0f} MiB/s): bulk is {row['per-record'][0] / row['bulk'][0]:.2f}x faster "
                f"(best; median {row['per-record'][1] / row['bulk'][1]:.2f}x)"
            )
        print(f"  load {os.getloadavg()[0]:.2f} after")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
