"""The server side of benchmarks/capture.py: the demo app (`raglake serve-demo`'s) wrapped to time its
own requests, and the process clocks (CPU, run-queue wait) that both sides read."""

from __future__ import annotations

import argparse
import cProfile
import glob
import io
import json
import pstats
import resource
import time
from pathlib import Path
from typing import Any

from _common import ROOT

SAMPLE = ROOT / "data" / "golden" / "sample.jsonl"


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
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
            }
        )
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
            return await self._json(
                send,
                {
                    "requests": len(self.walls),
                    "walls_ms": self.walls,
                    "cpu_s": cpu_seconds() - self.cpu0,
                    "run_s": run - self.sched0[0],
                    "wait_s": wait - self.sched0[1],
                    "seconds": time.perf_counter() - self.t0,
                    "profile": text,
                },
            )
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
