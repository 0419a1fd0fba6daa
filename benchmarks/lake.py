"""Benchmark the lake's queries at scale: breakdowns, compare_runs, metric_ci and trend.

    python benchmarks/lake.py [--runs 200] [--cases 500] [--metrics 30] [--repeat 3] [--keep DIR] [--quick]

Builds a synthetic lake with the project's own writer (raglake.lake.store.Lake.write, the schemas of
raglake.lake.tables), landed as raglake.lake.landing lands a run: cases, chunks (k=5), labels, scores
(one file per run, named by its scoring id), run_metrics, then the runs row last as the commit marker.
--runs runs over 4 targets, one about every day; --cases cases shared by every run (categories, tags,
difficulty, vault, answerable); --metrics case-level metrics, the first deterministic (non-judge) ones
of the registry, with plausible values (binary, 0-1 or cosine; a per-target level that drifts over
time, a per-case effect shared across runs, so paired comparisons look real), undefined where the
metric does not apply to the case and about 3% more undefined at random. Defaults: 3M score rows.

Then, on a fresh connection (open_lake(path), the CLI's path; the connect itself is timed
too), every query --repeat times: breakdown of one run and of 10 runs by every dimension, compare
(a paired test per slice, Benjamini-Hochberg across them), metric_ci by category, and trend of one
metric over every run.
Reported per query: the first (cold) and the median time, against the goal of under 1 s (judged on
the cold time: every CLI command opens a fresh connection). compare_runs is timed once more on a
fresh connection per call (the query alone, after open_lake; the CLI's case), and its rows are checked
to be identical on every one of those connections (its arithmetic is deterministic). As
baselines measured in the same run, two bare scans: one run's scores file, and every scores file
(avg by metric). Also: the build time and rows/s, and the lake's size on disk per table and per
million score rows. --keep DIR builds the lake in DIR and leaves it there; when DIR already holds a
lake, it is reused as is (no build).
Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow
from _common import ROOT

sys.path.insert(0, str(ROOT))

from lake_data import GOAL_S, build_lake, lake_size, pick_metrics  # noqa: E402

from raglake.analysis import DIMENSIONS
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake


def timed(fn, repeat: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times), result


def fresh_connections(root: Path, query, repeat: int) -> tuple[float, float, list]:
    """`query(q)` timed on a new connection each time (the connect itself not counted); the results."""
    times, results = [], []
    for _ in range(repeat):
        q = open_lake(root)
        t0 = time.perf_counter()
        results.append(query(q))
        times.append(time.perf_counter() - t0)
        q.con.close()
    return times[0], statistics.median(times), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--metrics", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", metavar="DIR", help="build the lake in DIR and keep it (reused when it exists)")
    parser.add_argument("--quick", action="store_true", help="a small lake: 20 runs x 100 cases x 10 metrics")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.cases, args.metrics = 20, 100, 10
    metrics = pick_metrics(args.metrics)
    tmp = None if args.keep else tempfile.TemporaryDirectory(prefix="raglake-lake-bench-")
    root = Path(args.keep or tmp.name) / ("" if args.keep else "lake")

    w = 78
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print("=" * w)
    print(
        f"raglake lake benchmark: {args.runs} runs x {args.cases} cases x {args.metrics} metrics "
        f"= {args.runs * args.cases * args.metrics:,} score rows"
    )
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPU(s), load average "
        f"{load:.2f}; duckdb {duckdb.__version__}, pyarrow {pyarrow.__version__}"
    )
    print("-" * w)
    built = None
    if Lake(root).exists():
        print(f"reusing the lake at {root} (not rebuilt; --runs/--cases/--metrics describe the build, not this lake)")
    else:
        built = build_lake(root, args.runs, args.cases, metrics, args.seed)
        total_rows = sum(built["rows"].values())
        print(
            f"build: {built['seconds']:.1f} s for {total_rows:,} rows in all tables "
            f"({total_rows / built['seconds']:,.0f} rows/s); {built['rows']['scores']:,} score rows "
            f"({built['rows']['scores'] / built['seconds']:,.0f} rows/s)"
        )
    size = lake_size(root)

    connect_s, connect_median, q = timed(lambda: open_lake(root), args.repeat)
    con = q.con
    score_rows, undefined = con.sql(
        "SELECT count(*), count(*) FILTER (WHERE status = 'undefined') FROM scores"
    ).fetchall()[0]
    order = con.sql("SELECT run_id, target_name FROM run_order ORDER BY newest_rank").fetchall()
    run = order[0][0]
    same_target = [r for r, t in order if t == order[0][1]]
    run_a, run_b = (same_target if len(same_target) > 1 else [r for r, _ in order] * 2)[1], run  # B: the newest
    ten = [r for r, _ in order[:10]]
    metric = metrics[2].name if len(metrics) > 2 else metrics[0].name
    one_file = [str(f) for f in (root / "scores" / f"run_id={run}").glob("*.parquet")]
    all_files = [str(f) for f in (root / "scores").glob("*/*.parquet")]
    print(f"lake: {score_rows:,} score rows ({undefined / score_rows:.1%} undefined), {len(order)} committed runs")

    queries: list[tuple[str, object]] = [
        (
            "baseline: scan 1 run's scores file",
            lambda: con.sql(
                "SELECT metric, avg(value) FROM read_parquet($f) GROUP BY metric", params={"f": one_file}
            ).fetchall(),
        ),
        (
            "baseline: scan all scores files",
            lambda: con.sql(
                "SELECT metric, avg(value) FROM read_parquet($f) GROUP BY metric", params={"f": all_files}
            ).fetchall(),
        ),
    ]
    queries += [(f"breakdown 1 run by {d}", lambda d=d: q.breakdown([run], d)) for d in DIMENSIONS]
    queries += [(f"breakdown 10 runs by {d}", lambda d=d: q.breakdown(ten, d)) for d in DIMENSIONS]
    queries += [
        ("compare_runs", lambda: q.compare(run_a, run_b)),
        ("metric_ci by category", lambda: q.metric_ci(run, "category")),
        (f"trend {metric} ({len(order)} runs)", lambda: q.trend(metric)),
    ]
    results: dict[str, tuple[float, float, int]] = {"connect (LakeQueries)": (connect_s, connect_median, 0)}
    print("-" * w)
    print(f"{'query':<38}{'cold s':>8}{'median s':>10}{'rows':>7}  goal < {GOAL_S:g} s (cold)")
    print(
        f"{'connect (LakeQueries)':<38}{connect_s:>8.3f}{connect_median:>10.3f}{'':>7}  "
        f"{'met' if connect_s < GOAL_S else 'NOT MET'}"
    )
    for name, fn in queries:
        cold, median, out = timed(fn, args.repeat)
        results[name] = (cold, median, len(out))
        verdict = "" if name.startswith("baseline") else ("met" if cold < GOAL_S else "NOT MET")
        print(f"{name:<38}{cold:>8.3f}{median:>10.3f}{len(out):>7}  {verdict}")
    name = "compare_runs, fresh connection"
    cold, median, outs = fresh_connections(root, lambda q2: q2.compare(run_a, run_b), args.repeat)
    results[name] = (cold, median, len(outs[0]))
    same = "identical rows on every connection" if all(o == outs[0] for o in outs) else "ROWS DIFFER"
    print(f"{name:<38}{cold:>8.3f}{median:>10.3f}{len(outs[0]):>7}  {'met' if cold < GOAL_S else 'NOT MET'}; {same}")
    base1 = results["baseline: scan 1 run's scores file"][1]
    base_all = results["baseline: scan all scores files"][1]
    b1 = statistics.median(results[f"breakdown 1 run by {d}"][1] for d in DIMENSIONS)
    tr = results[f"trend {metric} ({len(order)} runs)"][1]
    print(
        f"ratios (medians): breakdown 1 run / scan of its file {b1 / base1:.1f} x; trend / scan of all files "
        f"{tr / base_all:.1f} x"
    )

    print("-" * w)
    print(f"{'table':<14}{'files':>7}{'MB':>10}")
    for name, (files, nbytes) in size.items():
        if files:
            print(f"{name:<14}{files:>7}{nbytes / 1e6:>10.2f}")
    total = sum(b for _, b in size.values())
    per_m_scores = size["scores"][1] / 1e6 / (score_rows / 1e6)
    per_m_all = total / 1e6 / (score_rows / 1e6)
    print(f"{'all':<14}{sum(f for f, _ in size.values()):>7}{total / 1e6:>10.2f}")
    print(
        f"per million score rows: scores table {per_m_scores:.2f} MB ({size['scores'][1] / score_rows:.2f} B/row), "
        f"whole lake {per_m_all:.2f} MB"
    )
    print("=" * w)
    missed = [n for n, (c, _, _) in results.items() if not n.startswith("baseline") and c >= GOAL_S]
    print(
        json.dumps(
            {
                "runs": len(order),
                "cases": args.cases,
                "metrics": args.metrics,
                "score_rows": score_rows,
                "build_s": round(built["seconds"], 2) if built else None,
                "build_rows_per_s": round(sum(built["rows"].values()) / built["seconds"]) if built else None,
                "queries": {n: {"cold_s": round(c, 3), "median_s": round(m, 3)} for n, (c, m, _) in results.items()},
                "goal_missed": missed,
                "scores_mb_per_million": round(per_m_scores, 2),
                "lake_mb_per_million": round(per_m_all, 2),
                "lake_mb": round(total / 1e6, 2),
            }
        )
    )
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
