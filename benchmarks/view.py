"""`raglake view`: how long every page takes on a lake of about 1,000,000 score rows (benchmarks/lake_data.py's
synthetic lake, with judge calls added), after the first request. The goal (issue 28): under 0.5 s a page.

    python benchmarks/view.py                  # 40 runs x 1,000 cases x 25 metrics = 1,000,000 score rows
    python benchmarks/view.py --keep DIR       # build the lake in DIR once, reuse it after
    python benchmarks/view.py --quick          # 8 runs x 200 cases x 10 metrics

Each page is requested through the app in process (Starlette's test client: the app's own time, routing and
rendering included, no network), once cold, then --repeat times; the median of those is held against the goal
(the view keeps a page's figures while the lake is unchanged, so those requests only render). What a page
costs the first time it is asked is printed too: the first request, and the median over --repeat other runs'
Run and Compare pages never asked before.
The baseline, measured in the same run on the same connection: `raglake breakdown` of one run (one SQL file,
no page), so a page's figure can be read as a ratio on a busier or quieter machine. The machine's load average
is printed before and after."""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import quote

from _common import ROOT, work_folder

sys.path.insert(0, str(ROOT))

from lake_data import build_lake, pick_metrics  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from raglake.cli import sql_run  # noqa: E402
from raglake.lake.store import Lake  # noqa: E402
from raglake.lake.tables import TABLES, to_arrow  # noqa: E402
from raglake.view import web  # noqa: E402

GOAL_S = 0.5
N_CALLS = 20_000  # judge calls added to the synthetic lake (the ledger of a judged history)


def add_judge_calls(root: Path, n: int) -> str:
    """n judge calls in one ledger file; the key of one of them."""
    keys = [hashlib.sha256(f"call-{i}".encode()).hexdigest() for i in range(n)]
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    columns = {
        "call_key": keys,
        "created_at": [when] * n,
        "run_id": ["r-bench"] * n,
        "model": ["gpt-4o-mini"] * n,
        "prompt_id": ["correctness"] * n,
        "prompt_version": [1] * n,
        "request": ['{"messages": [{"role": "user", "content": "Score the answer."}]}'] * n,
        "response": ['{"choices": [{"message": {"content": "{\\"score\\": 4, \\"reasoning\\": \\"ok\\"}"}}]}'] * n,
        "output": ['{"score": 4, "reasoning": "ok"}'] * n,
        "status": ["ok"] * n,
        "prompt_tokens": [120] * n,
        "completion_tokens": [30] * n,
        "cost_usd": [0.00004] * n,
    }
    table = to_arrow(TABLES["judge_calls"], columns, optional=TABLES["judge_calls"].schema.names)
    Lake(root).write("judge_calls", when.date().isoformat(), table, "calls-bench")
    return keys[n // 2]


def timed(client: TestClient, url: str, repeat: int) -> tuple[float, list[float], int]:
    t0 = time.perf_counter()
    first = client.get(url)
    cold = time.perf_counter() - t0
    assert first.status_code == 200, (url, first.status_code, first.text[:500])
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        client.get(url)
        times.append(time.perf_counter() - t0)
    return cold, times, len(first.content)


def pages(state: web.LakeState, call_key: str) -> tuple[list[tuple[str, str]], str]:
    """(name, url) of every page, with the newest run, the previous run of its target and one of its cases;
    the newest run's id."""
    with state.queries() as q:
        runs = q.runs(1000)
        newest = runs[0]
        previous = next((r for r in runs[1:] if r["target_name"] == newest["target_name"]), runs[1])
        first = q.con.sql("SELECT min(case_id) FROM cases WHERE run_id = $r", params={"r": newest["run_id"]})
        case_id = first.fetchall()[0][0]
    b, a = newest["run_id"], previous["run_id"]
    query = f"SELECT metric, avg(value) AS mean FROM scores_latest WHERE run_id = '{b}' GROUP BY metric"
    return [
        ("Runs", "/runs"),
        ("Runs, filtered", f"/runs?target={quote(newest['target_name'])}&since=2026-02-01"),
        ("Run", web.run_url(b)),
        ("Worst cases", web.run_url(b) + "/worst"),
        ("Compare", web.compare_url(a, b)),
        ("Case", web.case_url(b, case_id, a)),
        ("Judge call", web.call_url(call_key)),
        ("Metrics", "/metrics"),
        ("Meta-evaluation", "/metaeval"),
        ("SQL", "/sql?q=" + quote(query)),
        ("SQL as CSV", "/sql.csv?q=" + quote(query)),
    ], b


def first_time(client: TestClient, state: web.LakeState, repeat: int) -> None:
    """The Run and Compare pages of runs never asked before: what a first click costs."""
    with state.queries() as q:
        runs = [r["run_id"] for r in q.runs(1000)][1 : repeat + 2]
    for name, urls in (
        ("Run", [web.run_url(r) for r in runs[1:]]),
        ("Compare", [web.compare_url(a, b) for a, b in zip(runs[1:], runs)]),
    ):
        times = []
        for url in urls:
            t0 = time.perf_counter()
            assert client.get(url).status_code == 200, url
            times.append(time.perf_counter() - t0)
        print(
            f"{name + ', first time':<18}{'':>10}{statistics.median(times) * 1000:>11.0f}"
            f"{min(times) * 1000:>7.0f}{max(times) * 1000:>7.0f}  (over {len(times)} pages never asked before)"
        )


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--metrics", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, metavar="DIR", help="build the lake in DIR and keep it (reused)")
    parser.add_argument("--quick", action="store_true", help="8 runs x 200 cases x 10 metrics")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.cases, args.metrics = 8, 200, 10
    with work_folder(args.keep, "raglake-view-bench-") as folder:
        root = folder / "lake"
        if not Lake(root).exists():
            built = build_lake(root, args.runs, args.cases, pick_metrics(args.metrics), args.seed)
            print(f"built {built['rows']['scores']:,} score rows in {built['seconds']:.1f} s")
        call_key = add_judge_calls(root, N_CALLS) if not (root / "judge_calls").exists() else None
        call_key = call_key or hashlib.sha256(f"call-{N_CALLS // 2}".encode()).hexdigest()
        run(root, call_key, args.repeat)


def run(root: Path, call_key: str, repeat: int) -> None:
    state = web.LakeState(str(root))
    client = TestClient(web.create_app(state, web.SqlLimits(sql_run.run_stoppable, sql_run.TABLE_ROWS, 60)))
    t0 = time.perf_counter()
    client.get("/static/view.css")  # the app's start: the connection opens on the first request
    with state.queries() as q:
        rows = q.con.sql("SELECT count(*) FROM scores").fetchall()[0][0]
        open_s = time.perf_counter() - t0
    listed, newest = pages(state, call_key)
    with state.queries() as q:
        base = [time.perf_counter()]
        for _ in range(repeat):
            q.breakdown([newest], "all")
            base.append(time.perf_counter())
    baseline = statistics.median(b - a for a, b in zip(base, base[1:]))
    print(f"raglake view benchmark: {rows:,} score rows; python {platform.python_version()}, {os.cpu_count()} CPU(s)")
    print(f"load average (1, 5, 15 min) before: {load()}; opening the lake: {open_s:.2f} s")
    print(f"baseline: breakdown of one run (sql/breakdown.sql alone), median of {repeat}: {baseline * 1000:.0f} ms")
    header = f"{'page':<18}{'first ms':>10}{'median ms':>11}{'min':>7}{'max':>7}{'KB':>8}{'x base':>8}"
    print(f"{header}  goal < {GOAL_S * 1000:.0f} ms")
    missed = []
    for name, url in listed:
        cold, times, size = timed(client, url, repeat)
        median = statistics.median(times)
        missed += [name] if median >= GOAL_S else []
        print(
            f"{name:<18}{cold * 1000:>10.0f}{median * 1000:>11.0f}{min(times) * 1000:>7.0f}{max(times) * 1000:>7.0f}"
            f"{size / 1024:>8.0f}{median / baseline:>8.1f}  {'met' if median < GOAL_S else 'NOT MET'}"
        )
    first_time(client, state, repeat)
    verdict = "every page met the goal" if not missed else "NOT MET: " + ", ".join(missed)
    print(f"load average after: {load()}; {verdict}")
    state.close()


if __name__ == "__main__":
    main()
