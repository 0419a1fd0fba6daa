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
(paired bootstrap, 1000 resamples), metric_ci by category, and trend of one metric over every run.
Reported per query: the first (cold) and the median time, against the goal of under 1 s (judged on
the cold time: every CLI command opens a fresh connection). As baselines measured in the same run,
two bare scans: one run's scores file, and every scores file (avg by metric). Also: the build time
and rows/s, and the lake's size on disk per table and per million score rows. --keep DIR builds the
lake in DIR and leaves it there; when DIR already holds a lake, it is reused as is (no build).
Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow
from _common import ROOT

sys.path.insert(0, str(ROOT))

from raglake.analysis import DIMENSIONS
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.registry import all_metrics, metric_versions
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.rows import RunRecord

GOAL_S = 1.0
K = 5
TARGETS = ("basic_search", "local_search", "hybrid_rerank", "graph_rag")
TARGET_LEVEL = (0.55, 0.62, 0.70, 0.66)  # quality on a logit-ish scale, drifting up over time
CATEGORIES = ("factual", "multi_hop", "temporal", "adversarial", "procedural", "comparison")
DIFFICULTIES = ("easy", "medium", "hard")
VAULTS = ("work", "personal")
TAGS = tuple(
    f"tag-{w}"
    for w in (
        "atlas",
        "postgres",
        "billing",
        "oncall",
        "hiring",
        "travel",
        "health",
        "infra",
        "security",
        "roadmap",
        "budget",
        "meetings",
        "legal",
        "family",
        "garden",
        "books",
    )
)
WORDS = (
    "the",
    "atlas",
    "database",
    "runs",
    "on",
    "instance",
    "meeting",
    "decided",
    "upgrade",
    "weekend",
    "team",
    "budget",
    "release",
    "service",
    "api",
    "latency",
    "replica",
    "migration",
    "policy",
    "review",
    "owner",
    "quarter",
    "plan",
    "incident",
    "runbook",
    "backup",
    "region",
    "cost",
    "vendor",
    "contract",
    "travel",
    "doctor",
    "appointment",
    "garden",
    "book",
    "notes",
    "march",
    "april",
    "we",
    "kept",
    "size",
    "after",
)
REASONS = {
    "retrieval": "no_gold_supports",
    "label": "no_labels",
    "abstention": "answerable",
    "embedding": "empty_answer",
}
EMBEDDER = "sentence-transformers/all-MiniLM-L6-v2@bcfe46d679df602d"


def sentences(rng: np.random.Generator, n: int, words: int) -> list[str]:
    picked = np.asarray(WORDS, dtype=object)[rng.integers(0, len(WORDS), size=(n, words))]
    return [" ".join(row).capitalize() + "." for row in picked]


def pick_metrics(n: int):
    chosen = [m for m in all_metrics(level="case") if m.family != "judge"][:n]
    if len(chosen) < n:
        raise SystemExit(f"the registry has only {len(chosen)} deterministic case-level metrics")
    return chosen


# ---- synthetic lake ----------------------------------------------------------------------------


def shared_cases(rng: np.random.Generator, n: int) -> dict:
    """The golden cases every run shares: ids, slices and texts (one row per case)."""
    ids = [f"c-{i:05d}" for i in range(n)]
    category = rng.choice(CATEGORIES, n, p=(0.35, 0.2, 0.15, 0.1, 0.1, 0.1))
    difficulty = rng.choice(DIFFICULTIES, n, p=(0.4, 0.4, 0.2))
    vault = rng.choice(VAULTS, n, p=(0.7, 0.3))
    answerable = rng.random(n) > 0.15
    n_tags = rng.choice(4, n, p=(0.1, 0.3, 0.4, 0.2))
    tags = [list(rng.choice(TAGS, k, replace=False)) for k in n_tags]
    questions = sentences(rng, n, 9)
    references = sentences(rng, n, 20)
    n_supports = np.where(answerable, rng.integers(1, 4, n), 0)
    supports = [
        json.dumps(
            [
                {
                    "rel_path": f"{vault[i]}/notes/note-{(i * 7 + j) % 400:03d}.md",
                    "heading_path": ["Note", f"Section {j}"],
                    "snippets": [],
                    "date": None,
                    "required": j == 0,
                }
                for j in range(n_supports[i])
            ]
        )
        for i in range(n)
    ]
    golden = [
        json.dumps(
            {
                "id": ids[i],
                "question": questions[i],
                "reference_answer": references[i],
                "answerable": bool(answerable[i]),
                "category": category[i],
                "difficulty": difficulty[i],
                "tags": tags[i],
                "vault": vault[i],
                "gold_supports": json.loads(supports[i]),
                "metadata": {"author": "bench"},
            }
        )
        for i in range(n)
    ]
    return {
        "case_id": ids,
        "question": questions,
        "reference_answer": references,
        "answerable": answerable,
        "category": category,
        "difficulty": difficulty,
        "tags": tags,
        "vault": vault,
        "expected_action": np.where(answerable, "answer", "refuse"),
        "n_gold_supports": n_supports,
        "gold_supports": supports,
        "metadata": ['{"author": "bench"}'] * n,
        "golden_case": golden,
        "effect": rng.normal(0, 0.6, n) - 0.5 * (difficulty == "hard") + 0.3 * (difficulty == "easy"),
    }


def run_tables(
    rng: np.random.Generator,
    cases: dict,
    metrics: list,
    chunk_pool: dict,
    target: str,
    level: float,
    scoring_id: str,
    scored_at: dt.datetime,
) -> dict:
    """Every table's rows of one run, as landing writes them (values drawn with numpy)."""
    n, m = len(cases["case_id"]), len(metrics)
    method = [target] * n
    latency = rng.gamma(4, 250, n)
    case_cols = {k: cases[k] for k in TABLES["cases"].schema.names if k in cases}
    case_cols.update(
        {
            "method": method,
            "capture_status": ["ok"] * n,
            "answer": sentences(rng, n, 25),
            "abstained": ~cases["answerable"] & (rng.random(n) < 0.7),
            "references": ["[]"] * n,
            "n_retrieved": np.full(n, K),
            "folder_mode": ["off"] * n,
            "selected_folders": [[]] * n,
            "latency_folder_selection_ms": np.zeros(n),
            "latency_retrieval_ms": latency * 0.1,
            "latency_generation_ms": latency * 0.9,
            "latency_total_ms": latency,
            "latency_wall_ms": latency * 1.05,
            "capture_hash": [f"{h:016x}" for h in rng.integers(0, 2**63, n)],
            "capture_attempts": np.ones(n, dtype=np.int32),
        }
    )
    picks = rng.integers(0, len(chunk_pool["text"]), n * K)
    chunk_case = np.repeat(np.asarray(cases["case_id"], dtype=object), K)
    chunk_rank = np.tile(np.arange(1, K + 1, dtype=np.int32), n)
    chunks = {
        "case_id": chunk_case,
        "rank": chunk_rank,
        "rel_path": chunk_pool["rel_path"][picks],
        "heading_path": chunk_pool["heading_path"][picks],
        "text": chunk_pool["text"][picks],
        "score": np.round(rng.uniform(0.3, 0.9, n * K), 2),
        "in_top_k": np.ones(n * K, dtype=bool),
        "matched_supports": [[] if x else [0] for x in rng.random(n * K) > 0.2],
    }
    label_names = ("topically_relevant", "evidence_sufficient", "misleading")
    labels = {
        "case_id": np.repeat(chunk_case, 3),
        "level": ["chunk"] * (3 * n * K),
        "rank": np.repeat(chunk_rank, 3),
        "label": np.tile(np.asarray(label_names, dtype=object), n * K),
        "value": (rng.random(3 * n * K) < 0.4).astype(np.int8),
        "label_source": ["human"] * (3 * n * K),
    }

    # scores, case-major as score_batch emits them: for every case, every metric
    case_idx, metric_idx = np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    families = np.asarray([x.family for x in metrics], dtype=object)[metric_idx]
    scales = np.asarray([x.scale for x in metrics], dtype=object)[metric_idx]
    lower_better = np.asarray([x.higher_is_better is False for x in metrics])[metric_idx]
    metric_shift = np.linspace(-0.8, 0.8, m)[rng.permutation(m)] if m > 1 else np.zeros(1)
    z = level + cases["effect"][case_idx] + metric_shift[metric_idx] + rng.normal(0, 0.8, n * m)
    p = 1 / (1 + np.exp(-z))
    p = np.where(lower_better, 1 - p, p)
    value = np.where(
        scales == "binary",
        (rng.random(n * m) < p).astype(float),
        np.where(scales == "cosine", 0.15 + 0.75 * p, np.clip(p + rng.normal(0, 0.1, n * m), 0, 1)),
    )
    value = np.round(value, 4)
    answerable = cases["answerable"][case_idx]
    applies = np.asarray([x.applies_to for x in metrics], dtype=object)[metric_idx]
    reason = np.full(n * m, None, dtype=object)
    reason[rng.random(n * m) < 0.03] = "x"
    random_undefined = reason == "x"
    reason[random_undefined] = np.vectorize(REASONS.get)(families[random_undefined])
    reason[(applies == "answerable") & ~answerable] = "not_answerable"
    reason[(applies == "unanswerable") & answerable] = "answerable"
    ok = np.equal(reason, None)  # elementwise on an object array
    value[~ok] = np.nan
    versions = metric_versions(metrics)
    scores = {
        "case_id": np.asarray(cases["case_id"], dtype=object)[case_idx],
        "metric": np.asarray([x.name for x in metrics], dtype=object)[metric_idx],
        "value": value,
        "status": np.where(ok, "ok", "undefined"),
        "reason": reason,
        "metric_version": np.asarray([versions[x.name] for x in metrics], dtype=object)[metric_idx],
        "label_source": np.where(ok & (families == "label"), "human", None),
        "embedder": np.where(ok & (families == "embedding"), EMBEDDER, None),
        "scoring_id": [scoring_id] * (n * m),
        "scored_at": [scored_at] * (n * m),
    }
    run_metrics = {
        "metric": ["latency_p50_ms", "latency_p95_ms", "error_rate", "timeout_rate", "suite_seconds"],
        "stage": ["total", "total", None, None, None],
        "value": [float(np.median(latency)), float(np.percentile(latency, 95)), 0.0, 0.0, float(n * 0.2)],
        "n": [n] * 5,
        "unit": ["ms", "ms", "share", "share", "seconds"],
        "metric_version": ["1"] * 5,
    }
    return {"cases": case_cols, "chunks": chunks, "labels": labels, "scores": scores, "run_metrics": run_metrics}


def build_lake(root: Path, n_runs: int, n_cases: int, metrics: list, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    lake = Lake(root)
    cases = shared_cases(rng, n_cases)
    pool = 4 * n_cases
    chunk_pool = {
        "rel_path": np.asarray([f"work/notes/note-{i % 400:03d}.md" for i in range(pool)], dtype=object),
        "heading_path": np.asarray([f"Note {i % 400} > Section {i % 7}" for i in range(pool)], dtype=object),
        "text": np.asarray(sentences(rng, pool, 60), dtype=object),
    }
    all_versions = metric_versions(all_metrics())
    start = dt.datetime(2026, 1, 1, 6, tzinfo=dt.UTC)
    rows: dict[str, int] = dict.fromkeys(TABLES, 0)
    t0 = time.perf_counter()
    for r in range(n_runs):
        t = r % len(TARGETS)
        target = TARGETS[t]
        started = start + dt.timedelta(days=r * 200 / max(n_runs, 1), minutes=int(rng.integers(0, 600)))
        finished = started + dt.timedelta(seconds=int(n_cases * 0.2))
        run_id = f"r-{started:%Y%m%d-%H%M%S}-{target}-{r:06x}"
        scoring_id = f"s-{rng.integers(0, 2**48):012x}"
        level = TARGET_LEVEL[t] + 0.4 * r / max(n_runs, 1) + rng.normal(0, 0.05)
        tables = run_tables(rng, cases, metrics, chunk_pool, target, level, scoring_id, finished)
        for name, cols in tables.items():  # landing's order: the run's files first ...
            table = to_arrow(TABLES[name], cols, optional=TABLES[name].schema.names)  # what it leaves out is null
            rows[name] += table.num_rows
            lake.write(name, run_id, table, scoring_id if name == "scores" else run_id, replace_uncommitted=True)
        record = RunRecord(
            run_id=run_id,
            started_at=started,
            finished_at=finished,
            target=f"http:{target}",
            target_kind="http",
            target_name=target,
            dataset_name="bench",
            dataset_path="bench.jsonl",
            dataset_hash="0123456789abcdef",
            n_cases=n_cases,
            k=K,
            require_snippets=False,
            code_version="0.1.0+bench",
            metric_versions=all_versions,
            embedder=EMBEDDER,
            config={"k": K, "metrics": [x.name for x in metrics], "target_config": {}},
        )
        lake.write(
            "runs", started.date().isoformat(), to_arrow(TABLES["runs"], record.columns()), run_id
        )  # ... runs last
        rows["runs"] += 1
    return {"seconds": time.perf_counter() - t0, "rows": rows}


def lake_size(root: Path) -> dict[str, tuple[int, int]]:
    """Files and bytes of every table's parquet files."""
    out = {}
    for name in TABLES:
        files = list((root / name).glob("*/*.parquet"))
        out[name] = (len(files), sum(f.stat().st_size for f in files))
    return out


# ---- timing ------------------------------------------------------------------------------------


def timed(fn, repeat: int) -> tuple[float, float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return times[0], statistics.median(times), result


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
    order = con.sql("SELECT run_id, target FROM run_order ORDER BY newest_rank").fetchall()
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
        ("compare_runs (1000 resamples)", lambda: q.compare(run_a, run_b)),
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
