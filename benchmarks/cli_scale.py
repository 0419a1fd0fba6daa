"""Benchmark `raglake run` (the CLI, Prefect included) at scale on generated replay data.

    python benchmarks/cli_scale.py [--cases 100000 1000000] [--batch-size 5000] [--dask] [--keep DIR]

For each size: a golden set and a replay file of that many cases (seeded; k = 10 retrieved chunks, 2-4
gold supports, a category, some unanswerable cases and abstentions) are written, then scored with the
retrieval, label and abstention families twice, in this one process's children, side by side:
  1. the CLI: `raglake run --golden G --target replay:C --metrics … -k 10 --batch-size B`, as a user runs it;
  2. the library path (every size; --library-smallest-only: the smallest only): the same pipeline steps
     called without Prefect (plan → stage → capture → score → land, raglake.pipeline.* and the tasks'
     plain functions), in a child process.
Reported per size: the stages' wall seconds the run recorded (stage_seconds), wall and CPU seconds
(user + system of the process tree), peak RSS of the largest
process (the CLI's own process; Prefect's server runs beside it and is reported apart), time per 100k
cases and its ratio to the smallest size's (linear scaling gives 1.0), and the CPU share spent in Prefect
machinery: 1 - library CPU / CLI CPU, split into Prefect's API server process (its CPU measured apart)
and the rest, in the CLI's own process (Prefect's import, engine and client). The library path does the
same raglake work as the CLI, the post-run summaries included, so that the difference is Prefect's.
With --dask, the smallest size also runs with `--runner dask` (LocalCluster, 2 workers) and the two
lakes' score rows are compared (identical rows expected). `uptime`'s load is printed: the machine is
shared. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from _common import ROOT, work_folder

FAMILIES = ("retrieval", "label", "abstention")
N_NOTES, K = 200, 10
CATEGORIES = ("factual", "reasoning", "multi_hop", "general")


def write_data(folder: Path, n: int, seed: int = 7) -> tuple[Path, Path]:
    """A golden set and a replay file of `n` cases, written a few thousand lines at a time."""
    rng = random.Random(seed)
    golden, captures = folder / f"golden-{n}.jsonl", folder / f"captures-{n}.jsonl"
    with golden.open("w") as g, captures.open("w") as c:
        for start in range(0, n, 5000):
            g_lines, c_lines = [], []
            for i in range(start, min(n, start + 5000)):
                case, capture = _one(rng, i)
                g_lines.append(json.dumps(case))
                c_lines.append(json.dumps(capture))
            g.write("\n".join(g_lines) + "\n")
            c.write("\n".join(c_lines) + "\n")
    return golden, captures


def _anchor(rng: random.Random) -> tuple[str, str]:
    note = rng.randrange(N_NOTES)
    heading = f"Note {note} > Sec {rng.randrange(12)}" + (f" > Part {rng.randrange(4)}" if rng.random() < 0.4 else "")
    return f"area-{note % 7}/note-{note:03d}.md", heading


def _one(rng: random.Random, i: int) -> tuple[dict, dict]:
    cid = f"c{i:07d}"
    answerable = rng.random() > 0.08
    supports = [dict(zip(("rel_path", "heading_path"), _anchor(rng))) for _ in range(rng.choice((2, 3, 3, 4)))]
    case = {"id": cid, "question": f"Question {i}?", "category": rng.choice(CATEGORIES), "answerable": answerable}
    if answerable:
        case["gold_supports"] = supports
        case["reference_answer"] = f"Reference answer {i}."
    retrieved = []
    for rank in range(1, K + 1):
        rel_path, heading = (
            (supports[rng.randrange(len(supports))]["rel_path"], supports[0]["heading_path"])
            if answerable and rng.random() < 0.25
            else _anchor(rng)
        )
        retrieved.append(
            {
                "rank": rank,
                "rel_path": rel_path,
                "heading_path": heading,
                "text": f"chunk {rank} of {cid}",
                "score": round(1.0 - rank / 20 + rng.random() / 100, 6),
            }
        )
    abstain = (not answerable and rng.random() < 0.6) or rng.random() < 0.03
    answer = "I don't know." if abstain else f"Answer {i}."
    capture = {
        "case_id": cid,
        "answer": answer,
        "abstained": abstain,
        "retrieved": retrieved,
        "latency_ms": {"retrieval": round(rng.uniform(5, 50), 3), "total": round(rng.uniform(50, 500), 3)},
    }
    return case, capture


def metric_names() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from raglake.metrics.registry import all_metrics

    return [m.name for m in all_metrics(level="case") if m.family in FAMILIES]


def env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(home / "prefect-results"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_BATCH_SIZE": "100",
        "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_BATCH_SIZE": "200",
    }


def measured(cmd: list[str], environ: dict[str, str]) -> dict[str, float]:
    """Run `cmd`; wall, CPU of the whole process tree, peak RSS of the main process and of the others."""
    t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = psutil.Popen(cmd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = {"main": 0, "others": 0}
    server_cpu: dict[int, float] = {}  # Prefect's API server process(es): CPU last seen (polled every 0.1 s)
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                kids = proc.children(recursive=True)
                peak["main"] = max(peak["main"], proc.memory_info().rss)
                peak["others"] = max(peak["others"], sum(k.memory_info().rss for k in kids))
                for kid in kids:
                    if "prefect.server.api.server:create_app" in " ".join(kid.cmdline()):
                        times = kid.cpu_times()
                        server_cpu[kid.pid] = times.user + times.system
            except psutil.Error:
                pass
            done.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    out, _ = proc.communicate()
    done.set()
    poller.join()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(out[-4000:])
        raise SystemExit(f"{' '.join(cmd[:4])} … exited {proc.returncode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every waited-for descendant's CPU
    total_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall": wall,
        "cpu": total_cpu,
        "server_cpu": sum(server_cpu.values()),
        "rss_main": peak["main"] / 2**20,
        "rss_others": peak["others"] / 2**20,
    }


def cli_cmd(golden: Path, captures: Path, lake: Path, batch: int, runner: str, metrics: list[str]) -> list[str]:
    cmd = [
        str(Path(sys.executable).parent / "raglake"),
        "run",
        "--golden",
        str(golden),
        "--target",
        f"replay:{captures}",
        "--lake",
        str(lake),
        "--k",
        str(K),
        "--batch-size",
        str(batch),
        "--runner",
        runner,
    ]
    for m in metrics:
        cmd += ["--metrics", m]
    return cmd


def lib_cmd(golden: Path, captures: Path, lake: Path, batch: int, metrics: list[str]) -> list[str]:
    script = Path(__file__).with_name("cli_scale_library.py")
    return [sys.executable, str(script), str(golden), str(captures), str(lake), str(batch), ",".join(metrics)]


def stage_seconds(lake: Path) -> str:
    """The run's stage_seconds figures (run_metrics), as `stage value` pairs."""
    import duckdb

    rows = duckdb.sql(
        f"SELECT stage, value FROM read_parquet('{lake}/run_metrics/**/*.parquet') WHERE metric = 'stage_seconds'"
    ).fetchall()
    return ", ".join(f"{stage} {value:.1f}" for stage, value in rows) or "none recorded"


def same_rows(lake_a: Path, lake_b: Path) -> bool:
    """The two lakes' score rows are the same multiset (DuckDB's EXCEPT ALL: NaN equals NaN there)."""
    import duckdb

    q = "SELECT case_id, metric, value, status, reason FROM read_parquet('{}/scores/**/*.parquet')"
    a, b = q.format(lake_a), q.format(lake_b)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # DuckDB 2.0 refuses it as a connect option
    [n] = con.sql(f"SELECT (SELECT count(*) FROM ({a})), (SELECT count(*) FROM ({b}))").fetchall()
    [(differ,)] = con.sql(f"SELECT count(*) FROM (({a} EXCEPT ALL {b}) UNION ALL ({b} EXCEPT ALL {a}))").fetchall()
    return n[0] == n[1] > 0 and differ == 0


def warm_prefect(work: Path, metrics: list[str]) -> None:
    """One small CLI run first, in the benchmark's fresh PREFECT_HOME: Prefect's first server start
    creates and migrates its database (several seconds of server CPU, once per PREFECT_HOME), which the
    measured runs, like a user's every later run, then find done. Its cost is printed apart."""
    golden, captures = write_data(work, 200)
    first = measured(cli_cmd(golden, captures, work / "lake-warm", 100, "thread", metrics), env(work))
    print(
        f"first run in a fresh PREFECT_HOME (200 cases; Prefect creates its database): cpu {first['cpu']:.1f} s,"
        f" of which its API server {first['server_cpu']:.1f} s (once per PREFECT_HOME; not in the figures below)"
    )


def print_prefect_share(cli: dict[str, float], lib: dict[str, float]) -> None:
    """The CPU the CLI spends beyond the library path (which does the same raglake work, post-run
    summaries included): Prefect's API server process (measured on its own) and, in the CLI's process,
    Prefect's import, engine and client (the difference that remains; it also holds the CLI's
    option parsing, a few tenths of a second)."""
    outside = cli["cpu"] - lib["cpu"]
    in_process = outside - cli["server_cpu"]
    print(
        f"  CPU in Prefect machinery: {outside:.1f} s of {cli['cpu']:.1f} s = {outside / cli['cpu']:.1%} (goal <= 10%):"
        f" its API server process {cli['server_cpu']:.1f} s, in the CLI's process {in_process:.1f} s"
        " (Prefect's import, flow and task engine, client)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, nargs="+", default=[100_000])
    ap.add_argument("--batch-size", type=int, default=5000)
    ap.add_argument("--dask", action="store_true")
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--library-smallest-only", action="store_true", help="the library path at the smallest size only")
    args = ap.parse_args(argv)
    with work_folder(args.keep, "raglake-scale-") as work:
        return run(args, work)


def run(args: argparse.Namespace, work: Path) -> int:
    metrics = metric_names()
    print(f"raglake run at scale — {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    print(f"metrics ({len(metrics)}): {', '.join(metrics)}; k = {K}; batch size {args.batch_size}")
    warm_prefect(work, metrics)
    base = None
    for n in sorted(args.cases):
        t0 = time.perf_counter()
        golden, captures = write_data(work, n)
        size = (golden.stat().st_size + captures.stat().st_size) / 2**20
        print(f"\n{n:,} cases: data written in {time.perf_counter() - t0:.1f} s ({size:.0f} MiB of JSONL)")
        smallest = n == min(args.cases)
        cli = measured(cli_cmd(golden, captures, work / f"lake-cli-{n}", args.batch_size, "thread", metrics), env(work))
        per_100k = cli["wall"] / n * 100_000
        base = base or per_100k
        print(
            f"  raglake run   wall {cli['wall']:7.1f} s  cpu {cli['cpu']:7.1f} s  peak RSS {cli['rss_main']:6.0f} MiB"
            f" (+ Prefect server and other children {cli['rss_others']:.0f} MiB; goal <= 2048 MiB: "
            f"{'met' if cli['rss_main'] <= 2048 else 'NOT met'})"
        )
        print(f"  per 100k cases {per_100k:.1f} s: x{per_100k / base:.2f} of the smallest size's (goal <= 1.2)")
        print(f"  stages (wall s, from the run's stage_seconds): {stage_seconds(work / f'lake-cli-{n}')}")
        if smallest or not args.library_smallest_only:  # the library path: what the CLI spends beyond raglake's work
            lib = measured(lib_cmd(golden, captures, work / f"lake-lib-{n}", args.batch_size, metrics), env(work))
            print(
                f"  library path  wall {lib['wall']:7.1f} s  cpu {lib['cpu']:7.1f} s  "
                f"peak RSS {lib['rss_main']:6.0f} MiB"
            )
            print_prefect_share(cli, lib)
        if args.dask and smallest:
            dask = measured(
                cli_cmd(golden, captures, work / f"lake-dask-{n}", args.batch_size, "dask", metrics), env(work)
            )
            same = same_rows(work / f"lake-cli-{n}", work / f"lake-dask-{n}")
            print(
                f"  --runner dask wall {dask['wall']:7.1f} s  cpu {dask['cpu']:7.1f} s;  rows identical to the"
                f" thread runner's: {'yes' if same else 'NO'}"
            )
        print(f"  load now {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
