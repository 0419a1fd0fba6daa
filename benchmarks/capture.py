"""Benchmark capture from a live service through the `http` target (issue 6).

    python benchmarks/capture.py [--cases 2000] [--concurrency 16] [--latency-ms 100]
                                 [--corpus data/corpus] [--repeat R] [--in-process] [--no-journal]
                                 [--profile N]

Starts the demo service (`raglake serve-demo`'s app: the builtin RAG over --corpus, in seed 001's
debug-API shape) with --latency-ms of injected latency and no other fault, then captures --cases
cases through raglake's HttpTarget (`target.capture(cases, journal)`: the call the flow's capture
task makes, with the per-run capture journal) at --concurrency, the config being
data/targets/demo.yaml pointed at the benchmark's port. The cases cycle the 66 questions of
data/golden/sample.jsonl, and the demo encodes those questions once before serving, so every
request hits its vector cache: the measure is the HTTP harness, not the embedding model. A warm-up
of 2 x concurrency requests precedes the timed passes.

Each of --repeat rounds times two passes over the same cases, alternating which goes first:
  raglake  HttpTarget.capture (render body, httpx request, retries loop, JSON, JSON-path mapping,
           pydantic Capture, journal line per capture);
  bare     the same requests with a bare httpx.AsyncClient (same limits, a semaphore, response.json()):
           the HTTP library's own cost, the floor raglake's harness sits on.

Reported per pass: cases/second, over the ideal (concurrency / latency: 160/s at the defaults; the
goal is raglake >= 0.8 of it); per-request wall as the client saw it (p50/p95) against the
server's own time per request (arrival to last byte, from an ASGI wrapper around the demo app, minus
the injected latency); CPU per request of the client and of the server; the time each process spent
runnable but waiting for a CPU (/proc/<pid>/task/*/schedstat: on a machine shared with other jobs
this, not either program, is often the limit); and Little's law (rate x mean wall = requests in
flight: close to --concurrency means every slot is busy and the limit is the round trip). Then the
client's CPU per case split into its raglake parts (JSON parse, mapping, pydantic, journal; timed on
recorded responses) and the rest (httpx/httpcore, sockets, the event loop). Nothing here asserts on
time.

The server runs as a SUBPROCESS by default (this file re-executed with --serve): a real service is
another process, and in-process the server's event loop, its answer threads and the client's loop
would share one GIL, so neither side's cost could be told apart. --in-process serves it from a
thread of this process instead, to show that contention. The demo's vector cache lives in
$RAGLAKE_CACHE or benchmarks/out/cache (ignored by git), so only the first run on a machine builds
the index from scratch (a minute or more for data/corpus on 2 slow cores).

--profile N: cProfile (top N by own time) of the client during the first raglake pass, and of the
server's event-loop thread (its answer threads are invisible to cProfile). Profiling roughly
doubles the client's CPU per request; the figures of a profiled pass are not the benchmark's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import ROOT

sys.path.insert(0, str(ROOT))

from capture_client import bare_capture, client_parts, free_port, report, run_pass, wait_healthy  # noqa: E402
from capture_server import SAMPLE, build_app, serve  # noqa: E402

DEMO_CONFIG = ROOT / "data" / "targets" / "demo.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--corpus", default="data/corpus")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of (raglake, bare) passes, order alternating")
    parser.add_argument("--in-process", action="store_true", help="serve from a thread of this process")
    parser.add_argument("--no-journal", action="store_true", help="capture without the per-run journal")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile, top N functions")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("RAGLAKE_CACHE", str(ROOT / "benchmarks" / "out" / "cache"))
    if args.serve:
        return serve(args)

    import yaml

    from raglake.golden import load_golden
    from raglake.schemas import GoldenCase
    from raglake.targets.http import HttpTarget
    from raglake.targets.http_client import _values
    from raglake.targets.http_config import render_body

    port = free_port()
    t_start = time.perf_counter()
    proc = server = thread = None
    if args.in_process:
        import uvicorn

        app = build_app(args.corpus, args.latency_ms, args.profile > 0)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
    else:
        command = [
            sys.executable,
            __file__,
            "--serve",
            "--port",
            str(port),
            "--corpus",
            args.corpus,
            "--latency-ms",
            str(args.latency_ms),
            "--profile",
            str(args.profile),
        ]
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    passes: list[dict[str, Any]] = []
    tmp: Path | None = None
    try:
        wait_healthy(port, proc)
        startup_s = time.perf_counter() - t_start
        tmp = Path(tempfile.mkdtemp(prefix="raglake-capture-bench-"))
        config = yaml.safe_load(DEMO_CONFIG.read_text())
        config.update(
            url=f"http://127.0.0.1:{port}/debug/query",
            manifest_url=f"http://127.0.0.1:{port}/debug/index",
            concurrency=args.concurrency,
        )
        (tmp / "bench.yaml").write_text(yaml.safe_dump(config))
        target = HttpTarget(str(tmp / "bench.yaml"))
        sample = load_golden(SAMPLE).cases
        cases = [
            GoldenCase(
                id=f"bench-{i:05d}",
                question=sample[i % len(sample)].question,
                vault=sample[i % len(sample)].vault,
                category=sample[i % len(sample)].category,
            )
            for i in range(args.cases)
        ]
        bodies = [render_body(target.config.body, _values(c, target.k)) for c in cases]
        target.capture([c.model_copy(update={"id": f"warm-{c.id}"}) for c in cases[: 2 * args.concurrency]])
        asyncio.run(bare_capture(target.config.url, bodies[: 2 * args.concurrency], args.concurrency))
        for r in range(args.repeat):
            order = ("raglake", "bare") if r % 2 == 0 else ("bare", "raglake")
            for kind in order:
                passes.append(
                    run_pass(
                        kind,
                        target,
                        cases,
                        bodies,
                        args,
                        port,
                        profile=bool(args.profile) and r == 0 and kind == "raglake",
                    )
                )
        parts = client_parts(target, cases, port)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if server is not None:
            server.should_exit = True
            thread.join(timeout=10)

    ideal = args.concurrency / (args.latency_ms / 1000) if args.latency_ms else float("inf")
    try:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    w = 100
    print("=" * w)
    print(
        f"raglake capture benchmark: {args.cases:,} cases, concurrency {args.concurrency}, {args.latency_ms:g} ms "
        f"injected latency; ideal {ideal:.0f} cases/s; "
        f"server {'in-process' if args.in_process else 'in a subprocess'}"
    )
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, load average {load}; "
        f"journal {'off' if args.no_journal else 'on'}; server ready after {startup_s:.1f} s"
        + ("; PROFILED first raglake pass" if args.profile else "")
    )
    print("-" * w)
    for p in passes:
        report(p, args, ideal, args.in_process)
    print("-" * w)
    mine = [p for p in passes if p["kind"] == "raglake"]
    mine = [p for p in mine if not p["profile"]] or mine  # a profiled pass counts only when it is the only one
    bare = [p for p in passes if p["kind"] == "bare"]
    rate = lambda ps: sum(p["n"] for p in ps) / sum(p["seconds"] for p in ps)  # noqa: E731
    cpu = lambda ps: sum(p["cpu_s"] for p in ps) / sum(p["n"] for p in ps) * 1000  # noqa: E731
    print(
        f"{'raglake HttpTarget: achieved':<44}{rate(mine):8.1f} cases/s   ratio to ideal {rate(mine) / ideal:.3f} "
        f"(goal >= 0.8)"
    )
    print(
        f"{'bare httpx, same requests: achieved':<44}{rate(bare):8.1f} cases/s   "
        f"ratio to ideal {rate(bare) / ideal:.3f}"
    )
    raglake_ms = sum(v for k, v in parts.items() if not k.startswith("_"))
    print(
        f"{'client+server' if args.in_process else 'client'} CPU per case: raglake pass {cpu(mine):.2f} ms, "
        f"bare pass {cpu(bare):.2f} ms; "
        f"raglake's own steps {raglake_ms:.2f} ms (responses of {parts['_bytes'] / 1024:.1f} KiB):"
    )
    print("  " + ", ".join(f"{k} {v:.3f}" for k, v in parts.items() if not k.startswith("_")))
    print("=" * w)
    for p in passes:
        if p["profile"]:
            print("cProfile of the client during the first raglake pass (top by own time):")
            print("\n".join(p["profile"].splitlines()[: args.profile + 10]))
        if p["server"].get("profile"):
            print("cProfile of the server's event-loop thread during that pass (top by own time):")
            print("\n".join(p["server"]["profile"].splitlines()[: args.profile + 10]))


if __name__ == "__main__":
    main()
