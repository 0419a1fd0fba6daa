"""What a bucket lake costs against a local one: the same `raglake run` with the lake and the results location
in a local folder, then in a bucket of an S3 API server on loopback (moto's server mode, behind the counting
proxy of tests/s3kit.py, no faults).

    python benchmarks/bucket.py [--cases 100000] [--batch-size 5000] [--keep DIR]

The data is cli_scale.py's (seeded replay data, k = 10, the retrieval, label and abstention metrics); one
200-case run first creates Prefect's database (not measured). Reported for each: wall and CPU seconds of
the run's process tree, the bytes written (local: the files' sizes under the lake and the results folder;
bucket: the bytes of every request body the server received, split into the lake and the results
location) and the requests (local: files written; bucket: by S3 operation), and the bucket's figures as
ratios of the local ones. The figures the former temp-key-then-`mv` writes would have cost (a PUT, a
server-side CopyObject writing the bytes again, and a DeleteObject per file) are derived from the counts.
Both runs' score rows are checked to be the same. moto keeps objects in memory and answers from one
Python process: its latency is loopback's, not a cloud's (each request here costs far less than S3's
tens of milliseconds), so the wall ratio is a floor. `uptime`'s load is printed: the machine is shared.
Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from _common import ROOT, work_folder
from cli_scale import cli_cmd, env, measured, metric_names, warm_prefect, write_data

sys.path.insert(0, str(ROOT))

from tests.s3kit import FaultProxy, MotoServer, list_keys, make_bucket, s3_env  # noqa: E402

BUCKET = "raglake-bench"


def local_bytes(*folders: Path) -> tuple[int, int]:
    """The files under the folders: how many, and their bytes."""
    files = [p for folder in folders for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def score_rows(lake: str) -> list[tuple]:
    from raglake.lake.query import connect
    from raglake.lake.store import Lake

    con = connect(Lake(lake))
    return con.sql(
        "SELECT count(*), count(DISTINCT case_id), sum(hash(case_id, metric, status)) FROM scores"
    ).fetchall()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args(argv)
    with work_folder(args.keep, "raglake-bucket-") as work:
        return run(args, work)


def run(args: argparse.Namespace, work: Path) -> int:
    metrics = metric_names()
    print(f"bucket lake against a local one — {platform.python_version()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()}")  # fmt: skip
    print(f"metrics ({len(metrics)}); k = 10; batch size {args.batch_size}")
    base_env = {**env(work), "TMPDIR": str(work)}
    warm_prefect(work, metrics)
    t0 = time.perf_counter()
    golden, captures = write_data(work, args.cases)
    print(f"{args.cases:,} cases: data written in {time.perf_counter() - t0:.1f} s")

    lake, results = work / "local" / "lake", work / "local" / "results"
    local = measured([*cli_cmd(golden, captures, lake, args.batch_size, "thread", metrics), "--results",
                      str(results)], base_env)  # fmt: skip
    files, written = local_bytes(lake, results)
    print(
        f"  local   wall {local['wall']:7.1f} s  cpu {local['cpu']:7.1f} s  {written / 2**20:8.1f} MiB in {files} files"
    )

    with MotoServer() as moto, FaultProxy(moto.url) as proxy:
        make_bucket(moto.url, BUCKET)
        s3 = {**s3_env(proxy.url, base_env)}
        url_lake, url_results = f"s3://{BUCKET}/lake", f"s3://{BUCKET}/results"
        cmd = cli_cmd(golden, captures, Path("LAKE"), args.batch_size, "thread", metrics)
        cmd[cmd.index("LAKE")] = url_lake
        bucket = measured([*cmd, "--results", url_results], s3)
        keys = list_keys(moto.url, BUCKET)
        requests, sent = dict(proxy.requests), {k: v for k, v in proxy.sent_by_folder.items() if k}
        by_folder = {k or "(listings, by prefix)": v for k, v in proxy.by_folder.items()}
        os.environ.update(s3_env(moto.url, {}))
        same = score_rows(url_lake) == score_rows(str(lake))
    total = sum(requests.values())
    puts = requests.get("PutObject", 0) + requests.get("UploadPart", 0)
    print(f"  bucket  wall {bucket['wall']:7.1f} s  cpu {bucket['cpu']:7.1f} s  "
          f"{sum(sent.values()) / 2**20:8.1f} MiB sent in {total} requests for {len(keys)} objects")  # fmt: skip
    print(f"    requests by operation: {dict(sorted(requests.items()))}")
    print(f"    by folder: requests {by_folder}; MiB sent "
          f"{ {k: round(v / 2**20, 1) for k, v in sent.items()} }")  # fmt: skip
    print(f"    score rows the same as the local run's: {'yes' if same else 'NO'}")
    print(f"  ratio bucket / local: wall x{bucket['wall'] / local['wall']:.2f}, "
          f"cpu x{bucket['cpu'] / local['cpu']:.2f}, "
          f"bytes written x{sum(sent.values()) / written:.2f}; {total / files:.1f} requests per file written "
          f"({puts} PUTs for {len(keys)} objects)")  # fmt: skip
    print(f"  the former temp key + mv, derived: {3 * len(keys)} write requests (PUT, CopyObject, DeleteObject per "
          f"object) instead of {puts}, and the store writing x2.00 the bytes (the copy)")  # fmt: skip
    print(f"  load now {os.getloadavg()}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
