"""The client side of benchmarks/capture.py: waiting for the demo server, the timed passes (raglake's
HttpTarget and a bare httpx client), raglake's own CPU per case on recorded responses, and each pass's
report lines."""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import pct
from capture_server import cpu_seconds, sched_seconds


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
    with tempfile.TemporaryDirectory(prefix="raglake-capture-parts-") as folder:
        journal = CaptureJournal(Path(folder) / "j.jsonl")

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


def run_pass(
    kind: str, target: Any, cases: list, bodies: list, args: argparse.Namespace, port: int, profile: bool
) -> dict[str, Any]:
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
        with tempfile.TemporaryDirectory(prefix="raglake-bench-") as folder:
            journal = None if args.no_journal else CaptureJournal(Path(folder) / "j.jsonl")
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
    out = {
        "kind": kind,
        "seconds": seconds,
        "n": len(cases),
        "walls": walls,
        "statuses": statuses,
        "cpu_s": cpu_seconds() - cpu0,
        "run_s": run1 - sched0[0],
        "wait_s": wait1 - sched0[1],
        "server": httpx.get(f"{base}/bench/stats", timeout=60).json(),
        "profile": None,
    }
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
    print(
        f"{p['kind']:<8} {n:,} cases in {p['seconds']:.2f} s: {rate:7.1f} cases/s = {rate / ideal:.3f} of ideal"
        f"   statuses {p['statuses']}"
    )
    print(
        f"  wall per request, client p50/p95 {pct(walls, 50):7.1f} / {pct(walls, 95):7.1f} ms"
        f"   server {pct(server_walls, 50):6.1f} / {pct(server_walls, 95):6.1f} ms"
        f"   (server minus latency {pct(server_walls, 50) - lat:.1f} / {pct(server_walls, 95) - lat:.1f})"
    )
    who = "client+server" if in_process else "client"
    print(
        f"  CPU per request: {who} {p['cpu_s'] / n * 1000:5.2f} ms"
        + ("" if in_process else f", server {s['cpu_s'] / server_n * 1000:5.2f} ms")
        + f"   busy: {who} {p['cpu_s'] / p['seconds']:.0%} of a core"
        + ("" if in_process else f", server {s['cpu_s'] / s['seconds']:.0%}")
    )
    print(
        f"  waiting for a CPU while runnable: {who} {p['wait_s']:.1f} s"
        + ("" if in_process else f", server {s['wait_s']:.1f} s")
        + f" over {p['seconds']:.1f} s"
        f"   in flight (Little) {in_flight:.1f} of {args.concurrency}"
    )
