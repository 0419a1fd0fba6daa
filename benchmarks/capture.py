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
import cProfile
import glob
import io
import json
import os
import platform
import pstats
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "data" / "golden" / "sample.jsonl"
DEMO_CONFIG = ROOT / "data" / "targets" / "demo.yaml"


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sched_seconds(pid: int | str = "self") -> tuple[float, float]:
    """(on a CPU, runnable but waiting for one) summed over the process's threads; zeros where the
    kernel does not say."""
    run = wait = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            fields = Path(path).read_text().split()
            run, wait = run + int(fields[0]), wait + int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    return run / 1e9, wait / 1e9


def pct(values: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


# ---- the server side ---------------------------------------------------------------------------------


class Timed:
    """ASGI wrapper around the demo app: each query's time in the app (arrival to last body byte),
    and the server process's CPU and run-queue wait between /bench/reset and /bench/stats."""

    def __init__(self, app: Any, profile: bool = False):
        self.app = app
        self.profile = profile
        self.profiler: cProfile.Profile | None = None
        self._reset()

    def _reset(self) -> None:
        self.walls: list[float] = []
        self.cpu0, self.sched0, self.t0 = cpu_seconds(), sched_seconds(), time.perf_counter()

    async def _json(self, send: Any, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path == "/bench/reset":
            self._reset()
            if self.profile and "profile=1" in scope.get("query_string", b"").decode():
                self.profiler = cProfile.Profile()
                self.profiler.enable()
            return await self._json(send, {"ok": True})
        if path == "/bench/stats":
            text = None
            if self.profiler is not None:
                self.profiler.disable()
                out = io.StringIO()
                pstats.Stats(self.profiler, stream=out).sort_stats("tottime").print_stats(30)
                text, self.profiler = out.getvalue(), None
            run, wait = sched_seconds()
            return await self._json(send, {
                "requests": len(self.walls), "walls_ms": self.walls, "cpu_s": cpu_seconds() - self.cpu0,
                "run_s": run - self.sched0[0], "wait_s": wait - self.sched0[1],
                "seconds": time.perf_counter() - self.t0, "profile": text})
        t = time.perf_counter()
        await self.app(scope, receive, send)
        if path == "/debug/query":
            self.walls.append((time.perf_counter() - t) * 1000)


def build_app(corpus: str, latency_ms: float, profile: bool = False) -> Timed:
    from raglake.demo.app import Faults, create_app
    from raglake.golden import load_golden
    from raglake.lake.store import Lake
    from raglake.targets.builtin import BuiltinTarget

    target = BuiltinTarget(corpus, Lake(None).url, None)
    target.manifest()
    target.capture(load_golden(SAMPLE).cases)  # every sample question in the demo's vector cache
    return Timed(create_app(target, Faults(latency_ms=latency_ms)), profile)


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    app = build_app(args.corpus, args.latency_ms, args.profile > 0)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


# ---- the client side ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(port: int, proc: subprocess.Popen | None, seconds: float = 900) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the demo server exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("the demo server did not come up")


async def bare_capture(url: str, bodies: list[dict[str, Any]], concurrency: int) -> list[float]:
    """The same requests through a bare httpx client: per-request wall times (ms)."""
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    slots = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(limits=limits) as client:
        async def one(body: dict[str, Any]) -> float:
            async with slots:
                t = time.perf_counter()
                response = await client.post(url, json=body, timeout=30)
                response.raise_for_status()
                response.json()
                return (time.perf_counter() - t) * 1000

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def client_parts(target: Any, cases: list, port: int, n: int = 1000) -> dict[str, float]:
    """CPU ms per case of raglake's own steps, on responses recorded from the demo."""
    import httpx

    from raglake.schemas import Capture
    from raglake.targets.http_client import _values, map_response
    from raglake.targets.http_config import render_body
    from raglake.targets.journal import CaptureJournal

    config = target.config
    picked = cases[:66]
    raw = [httpx.post(config.url, json=render_body(config.body, _values(c, 5)), timeout=30).content for c in picked]
    parsed = [json.loads(r) for r in raw]
    fields = [map_response(p, config, c.id) for p, c in zip(parsed, picked)]
    captures = [Capture.model_validate(f) for f in fields]
    journal = CaptureJournal(Path(tempfile.mkdtemp(prefix="raglake-capture-parts-")) / "j.jsonl")

    def timed(fn: Any) -> float:
        t0 = time.process_time()
        for i in range(n):
            fn(i % len(picked))
        return (time.process_time() - t0) / n * 1000

    return {
        "render body + encode JSON": timed(lambda i: json.dumps(render_body(config.body, _values(picked[i], 5)))),
        "parse JSON response": timed(lambda i: json.loads(raw[i])),
        "JSON-path mapping": timed(lambda i: map_response(parsed[i], config, picked[i].id)),
        "pydantic Capture": timed(lambda i: Capture.model_validate(fields[i])),
        "journal line": timed(lambda i: journal.append(picked[i], captures[i])),
        "_bytes": sum(map(len, raw)) / len(raw),
    }


def run_pass(kind: str, target: Any, cases: list, bodies: list, args: argparse.Namespace, port: int,
             profile: bool) -> dict[str, Any]:
    import httpx

    from raglake.targets.journal import CaptureJournal

    base = f"http://127.0.0.1:{port}"
    httpx.get(f"{base}/bench/reset", params={"profile": int(profile)}, timeout=30)
    profiler = cProfile.Profile() if profile else None
    cpu0, sched0 = cpu_seconds(), sched_seconds()
    t0 = time.perf_counter()
    if profiler:
        profiler.enable()
    if kind == "raglake":
        folder = Path(tempfile.mkdtemp(prefix="raglake-bench-"))
        journal = None if args.no_journal else CaptureJournal(folder / "j.jsonl")
        captures = target.capture(cases, journal)
        walls = [c.latency_ms.wall for c in captures if c.latency_ms.wall is not None]
        statuses: dict[str, int] = {}
        for c in captures:
            statuses[c.status] = statuses.get(c.status, 0) + 1
    else:
        walls = asyncio.run(bare_capture(target.config.url, bodies, args.concurrency))
        statuses = {"ok": len(walls)}
    if profiler:
        profiler.disable()
    seconds = time.perf_counter() - t0
    run1, wait1 = sched_seconds()
    out = {"kind": kind, "seconds": seconds, "n": len(cases), "walls": walls, "statuses": statuses,
           "cpu_s": cpu_seconds() - cpu0, "run_s": run1 - sched0[0], "wait_s": wait1 - sched0[1],
           "server": httpx.get(f"{base}/bench/stats", timeout=60).json(), "profile": None}
    if profiler:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(args.profile)
        out["profile"] = text.getvalue()
    return out


def report(p: dict[str, Any], args: argparse.Namespace, ideal: float, in_process: bool) -> None:
    n, lat, s = p["n"], args.latency_ms, p["server"]
    rate = n / p["seconds"]
    walls, server_walls = p["walls"], s["walls_ms"]
    in_flight = rate * (sum(walls) / len(walls)) / 1000
    server_n = max(1, s["requests"])
    print(f"{p['kind']:<8} {n:,} cases in {p['seconds']:.2f} s: {rate:7.1f} cases/s = {rate / ideal:.3f} of ideal"
          f"   statuses {p['statuses']}")
    print(f"  wall per request, client p50/p95 {pct(walls, 50):7.1f} / {pct(walls, 95):7.1f} ms"
          f"   server {pct(server_walls, 50):6.1f} / {pct(server_walls, 95):6.1f} ms"
          f"   (server minus latency {pct(server_walls, 50) - lat:.1f} / {pct(server_walls, 95) - lat:.1f})")
    who = "client+server" if in_process else "client"
    print(f"  CPU per request: {who} {p['cpu_s'] / n * 1000:5.2f} ms"
          + ("" if in_process else f", server {s['cpu_s'] / server_n * 1000:5.2f} ms")
          + f"   busy: {who} {p['cpu_s'] / p['seconds']:.0%} of a core"
          + ("" if in_process else f", server {s['cpu_s'] / s['seconds']:.0%}"))
    print(f"  waiting for a CPU while runnable: {who} {p['wait_s']:.1f} s"
          + ("" if in_process else f", server {s['wait_s']:.1f} s") + f" over {p['seconds']:.1f} s"
          f"   in flight (Little) {in_flight:.1f} of {args.concurrency}")


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
        command = [sys.executable, __file__, "--serve", "--port", str(port), "--corpus", args.corpus,
                   "--latency-ms", str(args.latency_ms), "--profile", str(args.profile)]
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    passes: list[dict[str, Any]] = []
    try:
        wait_healthy(port, proc)
        startup_s = time.perf_counter() - t_start
        tmp = Path(tempfile.mkdtemp(prefix="raglake-capture-bench-"))
        config = yaml.safe_load(DEMO_CONFIG.read_text())
        config.update(url=f"http://127.0.0.1:{port}/debug/query", manifest_url=f"http://127.0.0.1:{port}/debug/index",
                      concurrency=args.concurrency)
        (tmp / "bench.yaml").write_text(yaml.safe_dump(config))
        target = HttpTarget(str(tmp / "bench.yaml"))
        sample = load_golden(SAMPLE).cases
        cases = [GoldenCase(id=f"bench-{i:05d}", question=sample[i % len(sample)].question,
                            vault=sample[i % len(sample)].vault, category=sample[i % len(sample)].category)
                 for i in range(args.cases)]
        bodies = [render_body(target.config.body, _values(c, target.k)) for c in cases]
        target.capture([c.model_copy(update={"id": f"warm-{c.id}"}) for c in cases[: 2 * args.concurrency]])
        asyncio.run(bare_capture(target.config.url, bodies[: 2 * args.concurrency], args.concurrency))
        for r in range(args.repeat):
            order = ("raglake", "bare") if r % 2 == 0 else ("bare", "raglake")
            for kind in order:
                passes.append(run_pass(kind, target, cases, bodies, args, port, profile=bool(args.profile) and r == 0
                                       and kind == "raglake"))
        parts = client_parts(target, cases, port)
    finally:
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
    print(f"raglake capture benchmark: {args.cases:,} cases, concurrency {args.concurrency}, {args.latency_ms:g} ms "
          f"injected latency; ideal {ideal:.0f} cases/s; "
          f"server {'in-process' if args.in_process else 'in a subprocess'}")
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, load average {load}; "
          f"journal {'off' if args.no_journal else 'on'}; server ready after {startup_s:.1f} s"
          + ("; PROFILED first raglake pass" if args.profile else ""))
    print("-" * w)
    for p in passes:
        report(p, args, ideal, args.in_process)
    print("-" * w)
    mine = [p for p in passes if p["kind"] == "raglake"]
    mine = [p for p in mine if not p["profile"]] or mine  # a profiled pass counts only when it is the only one
    bare = [p for p in passes if p["kind"] == "bare"]
    rate = lambda ps: sum(p["n"] for p in ps) / sum(p["seconds"] for p in ps)  # noqa: E731
    cpu = lambda ps: sum(p["cpu_s"] for p in ps) / sum(p["n"] for p in ps) * 1000  # noqa: E731
    print(f"{'raglake HttpTarget: achieved':<44}{rate(mine):8.1f} cases/s   ratio to ideal {rate(mine) / ideal:.3f} "
          f"(goal >= 0.8)")
    print(f"{'bare httpx, same requests: achieved':<44}{rate(bare):8.1f} cases/s   "
          f"ratio to ideal {rate(bare) / ideal:.3f}")
    raglake_ms = sum(v for k, v in parts.items() if not k.startswith("_"))
    print(f"{'client+server' if args.in_process else 'client'} CPU per case: raglake pass {cpu(mine):.2f} ms, "
          f"bare pass {cpu(bare):.2f} ms; "
          f"raglake's own steps {raglake_ms:.2f} ms (responses of {parts['_bytes'] / 1024:.1f} KiB):")
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
