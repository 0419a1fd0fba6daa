"""Side-by-sides of benchmarks/embedding.py (issue 12): raglake's semantic_similarity against ragas'
`evaluate()` with SemanticSimilarity on the same cases and model; the embedding stage of a real
`raglake run` (CLI, Prefect included) against the raw `SentenceTransformer.encode` of its texts; and the
length-sorted encoding against the slicing it replaces (time and values). Nothing here asserts."""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import ROOT
from embedding_inputs import build_pairs, load_inputs
from embedding_ragas import run_ragas
from embedding_scoring import raw_encode, score_pairs

from raglake import progress
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.model import DEVICES
from raglake.embed.texts import collect_texts
from raglake.lake.query import fetch
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric
from raglake.pipeline.lakes import open_lake

GOAL_RAGAS = 1.0  # raglake (--metrics semantic_similarity) / ragas evaluate(), at most
GOAL_CLI_RAW = 1.15  # the CLI's embedding stage / raw encode of its texts, at most
GOAL_GPU = 0.8  # on a GPU: raw encode time / stage time (the stage's share of encode's speed), at least


def _comparable(pairs: list, n: int) -> list:
    """The first n cases ragas can score too: a capture that did not fail, an answer and a reference."""
    ok = [(c, x) for c, x in pairs if not x.failed and x.answer.strip() and (c.reference_answer or "").strip()]
    return ok[:n]


def _raglake_semantic(cases: list, embedder, k: int) -> tuple[float, float, dict[str, float], int]:
    """(wall s, process CPU s, values by case, texts encoded): encode -> score_columnar in batches, empty cache."""
    gc.collect()
    t0, c0 = time.perf_counter(), time.process_time()
    encoder = TextEncoder(embedder, EmbeddingCache(None, embedder.key, embedder.device))
    scored = score_pairs(cases, [get_metric("semantic_similarity")], ScoringConfig(k=k), encoder=encoder)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall, cpu, dict(zip(scored.scores["case_id"], scored.scores["value"])), encoder.stats.encoded


def ragas_side_by_side(pairs: list, embedder, n: int, k: int, repeat: int = 1) -> list[str]:
    """raglake's library path (semantic_similarity alone) against ragas' evaluate() on the same cases,
    model and device; `repeat` times each, alternating (a shared machine's load drifts), fastest kept."""
    cases = _comparable(pairs, n)
    all_texts = len(collect_texts(cases, k, [m for m in all_metrics(level="case") if m.texts]))
    rows = [{"user_input": c.question, "response": x.answer, "reference": c.reference_answer} for c, x in cases]
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(_raglake_semantic(cases, embedder, k))
        theirs.append(run_ragas(rows, str(embedder.path), embedder.device))
        if theirs[-1] is None or "error" in theirs[-1]:
            break
    wall, cpu, values, encoded = min(ours)
    lines = [
        f"semantic_similarity side by side: {len(cases):,} cases (answer and reference present), "
        f"device {embedder.device}, fastest of {len(ours)} alternating",
        f"  raglake score_columnar, semantic_similarity only{wall:>11.2f} s  cpu {cpu:.2f} s; {encoded:,} texts "
        f"encoded (all six vector metrics would read {all_texts:,})",
    ]
    if theirs[-1] is None:
        return [*lines, "  ragas not installed: skipped (python benchmarks/embedding_ragas.py --install)"]
    if "error" in theirs[-1]:
        return [*lines, "  ragas failed:", theirs[-1]["error"]]
    best = min(theirs, key=lambda r: r["seconds"])
    ratio, ratio_cpu = wall / best["seconds"], cpu / min(r["cpu"] for r in theirs)
    diffs = [abs(values[c.id] - s) for (c, _), s in zip(cases, best["scores"]) if s >= 0]
    return [
        *lines,
        f"  ragas {best['ragas']} evaluate(SemanticSimilarity){best['seconds']:>16.2f} s  cpu "
        f"{min(r['cpu'] for r in theirs):.2f} s (its process, imports and model load included: "
        f"{best['process_wall']:.1f} s)",
        f"  ratio raglake / ragas{ratio:>30.3f}    goal <= {GOAL_RAGAS:.2f}: "
        f"{'met' if ratio <= GOAL_RAGAS else 'NOT met'}   (on process CPU time: {ratio_cpu:.3f})",
        f"  max |raglake - ragas| where cos >= 0{max(diffs, default=float('nan')):>15.1e}   "
        f"({len(diffs)} of {len(cases)} cases; raglake clips a negative cosine to 0)",
        f"  walls: raglake {', '.join(f'{o[0]:.2f}' for o in ours)}; ragas "
        + ", ".join(f"{r['seconds']:.2f}" for r in theirs),
    ]


def _jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def cli_stage(
    cases: list[dict], captures: list[dict], metrics: list[str], embedder, k: int, load_s: float, repeat: int = 1
) -> list[str]:
    """`raglake run` on these cases (replayed captures, a fresh lake and vector cache each time), its
    recorded embedding stage against the raw encode, in this process, of the texts that stage encoded;
    with repeat R, R runs with a raw encode before each and one after, the fastest of each compared."""
    pairs = build_pairs(cases, captures)
    texts = collect_texts(pairs, k, [get_metric(m) for m in metrics])
    raws, stages, walls, seconds = [raw_encode(embedder, texts)[0]], [], [], {}
    for _ in range(max(1, repeat)):
        with tempfile.TemporaryDirectory(prefix="raglake-embcli-") as tmp:
            golden = _jsonl(Path(tmp) / "golden.jsonl", cases)
            replay = _jsonl(Path(tmp) / "captures.jsonl", captures)
            lake = str(Path(tmp) / "lake")
            env = {**os.environ, "RAGLAKE_CACHE": str(Path(tmp) / "cache"), "COLUMNS": "200"}
            cmd = [sys.executable, "-m", "raglake", "run", "--golden", golden, "--target", f"replay:{replay}"]
            cmd += ["--lake", lake, "--k", str(k), "--metrics", ",".join(metrics), "--device", embedder.device]
            t0 = time.perf_counter()
            done = subprocess.run([*cmd, "-q"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
            walls.append(time.perf_counter() - t0)
            if done.returncode != 0:
                return [f"raglake run failed ({done.returncode}):", (done.stdout + done.stderr)[-2000:]]
            q = open_lake(lake)
            figures = fetch(
                q.con,
                "SELECT metric, stage, value FROM run_metrics WHERE metric IN ('stage_seconds', 'embedding_texts')",
            )
            q.con.close()
        seconds = {(m, s): v for m, s, v in figures}
        stages.append(seconds[("stage_seconds", "embedding")])
        gc.collect()
        raws.append(raw_encode(embedder, texts)[0])
    stage, raw_s = min(stages), min(raws)
    ratio = stage / raw_s
    head = f"raglake run --metrics {','.join(metrics) if len(metrics) < 3 else f'<{len(metrics)} metrics>'}"
    runs = f" (fastest of {len(stages)}: {', '.join(f'{s:.2f}' for s in stages)})" if len(stages) > 1 else ""
    return [
        f"{head}: {len(cases):,} cases, k={k}, device {embedder.device}; CLI wall {min(walls):.1f} s",
        f"  CLI embedding stage (stage_seconds){stage:>16.2f} s  "
        f"texts: {seconds.get(('embedding_texts', 'distinct'), float('nan')):,.0f} distinct, "
        f"{seconds.get(('embedding_texts', 'encoded'), float('nan')):,.0f} encoded ({len(texts):,} here){runs}",
        f"  raw SentenceTransformer.encode, same texts{raw_s:>9.2f} s  (this process, model warm; fastest of "
        f"{len(raws)}: one call before the CLI runs and one after each)",
        f"  ratio CLI stage / raw encode{ratio:>23.3f}    goal <= {GOAL_CLI_RAW:.2f}: "
        f"{'met' if ratio <= GOAL_CLI_RAW else 'NOT met'}   (the CLI loads its model ({load_s:.1f} s here) while "
        "Prefect starts; the stage waits only for what is left of that load)",
    ]


def sorting_check(embedder, texts: list[str], repeat: int = 2, slice_: int = 1024) -> list[str]:
    """The encoder as it sliced before (collection order, slices of `slice_`, each sorted by
    sentence-transformers within the call) against the length-sorted slicing, with a progress display
    on (the CLI's case); values against one raw encode of every text."""

    def old() -> np.ndarray:
        return np.concatenate([embedder.encode(texts[i : i + slice_]) for i in range(0, len(texts), slice_)])

    def new() -> np.ndarray:
        was, progress.active = progress.active, lambda: True
        try:
            return TextEncoder(embedder, EmbeddingCache(None, embedder.key))._encode_reporting(texts)
        finally:
            progress.active = was

    times: dict[str, list[float]] = {"old": [], "new": []}
    out: dict[str, np.ndarray] = {}
    for rep in range(repeat):
        for name, fn in (("old", old), ("new", new)) if rep % 2 == 0 else (("new", new), ("old", old)):
            gc.collect()
            t0 = time.perf_counter()
            out[name] = fn()
            times[name].append(time.perf_counter() - t0)
    one = embedder.encode(texts)
    t_old, t_new = min(times["old"]), min(times["new"])
    return [
        f"length-sorted encoding: {len(texts):,} texts in slices of {slice_} (progress display on), "
        f"fastest of {repeat}, interleaved",
        f"  slices in collection order (before){t_old:>15.2f} s  max |v - one encode| "
        f"{np.abs(out['old'] - one).max():.1e}",
        f"  slices sorted by length (now){t_new:>21.2f} s  max |v - one encode| {np.abs(out['new'] - one).max():.1e}",
        f"  ratio now / before{t_new / t_old:>33.3f}",
    ]


def add_compare_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--device", choices=DEVICES, default="auto", help="where the embedder runs (default auto)")
    ap.add_argument("--ragas-cases", type=int, default=100, help="semantic_similarity beside ragas (0: off)")
    ap.add_argument("--cli-cases", type=int, default=300, help="the CLI's embedding stage vs raw encode (0: off)")
    ap.add_argument("--sorting", type=int, default=0, help="length-sorted slices vs before, on N texts (0: off)")


def run_side_by_sides(args: argparse.Namespace, embedder, load_s: float):
    """Each side-by-side the options ask for, as a block of lines (yielded as each finishes)."""
    n = max(args.ragas_cases, args.cli_cases, args.sorting and args.cases)
    if not n:
        return
    cases, captures, *_ = load_inputs(embedder, n, args.chunks, args.seed, args.distinct_chunks)
    pairs = build_pairs(cases, captures)
    if args.ragas_cases:
        yield ragas_side_by_side(pairs, embedder, args.ragas_cases, args.chunks, args.repeat)
    if args.cli_cases:
        few, their = cases[: args.cli_cases], captures[: args.cli_cases]
        six = [m.name for m in all_metrics(level="case") if m.texts]
        yield cli_stage(few, their, six, embedder, args.chunks, load_s, args.repeat)
        yield cli_stage(few, their, ["semantic_similarity"], embedder, args.chunks, load_s, args.repeat)
    if args.sorting:
        six = [m for m in all_metrics(level="case") if m.texts]
        texts = collect_texts(pairs, args.chunks, six)[: args.sorting]
        yield sorting_check(embedder, texts)
