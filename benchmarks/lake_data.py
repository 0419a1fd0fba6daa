"""The synthetic lake of benchmarks/lake.py: runs × cases × metrics of score rows with realistic
slices, reasons and drift, written through the lake's own landing code."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path

import numpy as np
from _common import ROOT

sys.path.insert(0, str(ROOT))

from raglake.lake.store import Lake  # noqa: E402
from raglake.lake.tables import TABLES, to_arrow  # noqa: E402
from raglake.metrics.registry import all_metrics, metric_versions  # noqa: E402
from raglake.pipeline.rows import RunRecord  # noqa: E402

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
        "gold_support_list": [  # the lake's layout: heading_path as `A > B`
            [{**g, "heading_path": " > ".join(g["heading_path"])} for g in json.loads(s)] for s in supports
        ],
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
            "reference_list": [[]] * n,
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
    reason[random_undefined] = np.vectorize(REASONS.get, otypes=[object])(families[random_undefined])
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
