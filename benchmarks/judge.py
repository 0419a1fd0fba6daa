"""Benchmark the judge gateway's throughput and the ledger's re-scoring against a loopback server.

    python benchmarks/judge.py [--calls 1000] [--concurrency 32] [--latency-ms 200] [--no-baseline]

Starts the loopback OpenAI-compatible server of tests/fake_openai.py in its own process, adding
--latency-ms to every request, and sends --calls distinct groundedness calls through the real
JudgeGateway (openai client, concurrency limit, schema validation, ledger rows flushed to a temporary
lake) at --concurrency. The ideal rate is concurrency / latency (32 / 0.2 s = 160 calls/s); reported:
achieved calls/second and its ratio to the ideal (goal ≥ 0.9). For scale, the same number of requests
is also sent with the bare AsyncOpenAI client at the same concurrency (the same request bodies,
json_schema response format included: what this machine allows without the gateway), and the client
CPU time per call is printed for both (on a small machine the openai client's own CPU cost bounds
the rate). Then the same calls again through a new gateway over the same lake: the
number of HTTP requests the server saw (goal: zero) and the time. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from raglake.judge.config import JudgeConfig, load_prices  # noqa: E402
from raglake.judge.gateway import JudgeGateway  # noqa: E402
from raglake.judge.ledger import JudgeLedger  # noqa: E402
from raglake.judge.prompts import get_prompt  # noqa: E402
from raglake.lake.calls import LakeCallStore  # noqa: E402
from raglake.lake.query import connect  # noqa: E402
from raglake.lake.store import Lake  # noqa: E402

PROMPT = "groundedness"


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fake_openai.py"), "--latency-ms", str(latency_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit(f"the loopback server did not start: {process.stderr.read()[-2000:]}")
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{url}/models", timeout=2).raise_for_status()
            return process, url
        except httpx.HTTPError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the loopback server did not answer: {process.stderr.read()[-2000:]}") from None
            time.sleep(0.1)


def process_cpu(pid: int) -> float:
    """CPU seconds a process used so far (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def served(url: str) -> int:
    return httpx.get(url.removesuffix("/v1") + "/_stats", timeout=5).json()["requests"]


def call_values(n: int) -> list[dict[str, str]]:
    return [
        {
            "answer": f"Atlas uses Postgres 16 [1]. (case {i})",
            "contexts": "[1] We run Postgres 16.\n\n[2] Billing runs on Stripe.",
        }
        for i in range(n)
    ]


def gateway(url: str, lake: Lake, concurrency: int) -> JudgeGateway:
    config = JudgeConfig(
        base_url=url,
        model="gpt-4o-mini",
        concurrency=concurrency,
        timeout_s=60,
        max_retries=2,
        backoff_s=0.1,
        prices=load_prices(),
    )
    return JudgeGateway(config, JudgeLedger(LakeCallStore(lake), run_id="r-bench"))


def judge_all(
    url: str, lake: Lake, concurrency: int, values: list[dict[str, str]]
) -> tuple[float, JudgeGateway, Counter]:
    prompt = get_prompt(PROMPT)

    timing: dict[str, float] = {}

    async def main() -> list:
        gw = gateway(url, lake, concurrency)  # built inside the loop that uses it
        t_load = time.perf_counter()
        gw.ledger.preload()  # once per run, before the first call: timed apart from the calls
        timing["load"] = time.perf_counter() - t_load
        timing["t0"], timing["cpu0"] = time.perf_counter(), time.process_time()
        results = await asyncio.gather(*(gw.call(prompt, v) for v in values))
        await gw.client.close()
        return [gw, results]

    gw, results = asyncio.run(main())
    gw.ledger.flush()
    gw.cpu_seconds = time.process_time() - timing["cpu0"]  # type: ignore[attr-defined]
    gw.ledger_load_s = timing["load"]  # type: ignore[attr-defined]
    return time.perf_counter() - timing["t0"], gw, Counter(r.status for r in results)


def bare_client(url: str, concurrency: int, n: int) -> tuple[float, float]:
    """The same number of requests with the plain AsyncOpenAI client: this machine's ceiling."""
    from openai import AsyncOpenAI

    prompt = get_prompt(PROMPT)
    messages = [prompt.render(v) for v in call_values(n)]
    fmt = {"type": "json_schema", "json_schema": {"name": prompt.id, "schema": prompt.output_schema, "strict": False}}

    async def main() -> None:
        client = AsyncOpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=60)
        slots = asyncio.Semaphore(concurrency)

        async def one(m: list[dict[str, str]]) -> None:
            async with slots:
                await client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=m,
                    temperature=0,
                    seed=0,
                    max_tokens=prompt.max_tokens,
                    response_format=fmt,
                )

        await asyncio.gather(*(one(m) for m in messages))
        await client.close()

    t0, cpu0 = time.perf_counter(), time.process_time()
    asyncio.run(main())
    return time.perf_counter() - t0, time.process_time() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--no-baseline", action="store_true", help="skip the bare-client run")
    args = parser.parse_args()
    n, c, latency = args.calls, args.concurrency, args.latency_ms / 1000
    ideal = c / latency

    print(f"judge gateway benchmark: {n} calls ({PROMPT}), concurrency {c}, {args.latency_ms:g} ms injected latency")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU(s), load average "
        f"{load:.2f}; "
        f"loopback server in its own process"
    )
    process, url = start_server(args.latency_ms)
    try:
        values = call_values(n)
        with tempfile.TemporaryDirectory(prefix="raglake-judge-bench-") as tmp:
            lake = Lake(Path(tmp) / "lake")
            bare_client(url, c, 2 * c)  # warm-up: imports, first connections (not measured)

            before, server_cpu = served(url), process_cpu(process.pid)
            seconds, gw, statuses = judge_all(url, lake, c, values)
            made = served(url) - before
            server_cpu = process_cpu(process.pid) - server_cpu
            rate = n / seconds
            print(
                f"\nfirst run   : {n} calls in {seconds:.2f} s = {rate:.1f} calls/s; ideal {c} / {latency:g} s = "
                f"{ideal:.0f} calls/s; ratio {rate / ideal:.3f} (goal >= 0.9)"
            )
            print(
                f"              HTTP requests {made}, statuses {dict(statuses)}, retries {gw.stats.retries}, "
                f"tokens {gw.stats.prompt_tokens}+{gw.stats.completion_tokens}, cost ${gw.stats.cost_usd:.4f}"
            )
            rows = connect(lake).sql("SELECT count(*), count(DISTINCT call_key) FROM judge_calls").fetchall()[0]
            print(
                f"              ledger rows {rows[0]} ({rows[1]} distinct keys); "
                f"client CPU {gw.cpu_seconds / n * 1000:.2f} ms per call "
                f"(one core allows at most {n / gw.cpu_seconds:.0f} calls/s); loopback server CPU "
                f"{server_cpu / max(made, 1) * 1000:.2f} ms per request"
            )
            print(
                f"              ledger read before the first call {gw.ledger_load_s:.2f} s (once per run; not in the "
                f"rate)"
            )

            if not args.no_baseline:
                bare, bare_cpu = bare_client(url, c, n)
                print(
                    f"bare client : {n} requests in {bare:.2f} s = {n / bare:.1f} requests/s; ratio to ideal "
                    f"{n / bare / ideal:.3f}; client CPU {bare_cpu / n * 1000:.2f} ms per request "
                    f"(the same requests through the openai SDK's chat.completions.create, no gateway: for scale)"
                )

            before = served(url)
            seconds2, gw2, statuses2 = judge_all(url, lake, c, values)
            made2 = served(url) - before
            print(
                f"second run  : {n} calls in {seconds2:.2f} s + ledger read {gw2.ledger_load_s:.2f} s, "
                f"HTTP requests {made2} (goal 0), "
                f"ledger hits {gw2.stats.ledger_hits}, statuses {dict(statuses2)}"
            )
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    print(
        json.dumps(
            {
                "calls": n,
                "concurrency": c,
                "latency_ms": args.latency_ms,
                "calls_per_s": round(rate, 1),
                "ideal_per_s": round(ideal, 1),
                "ratio": round(rate / ideal, 3),
                "rerun_http_requests": made2,
                "rerun_seconds": round(seconds2, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
