"""The checks of benchmarks/embedding.py besides timing: --stsb (Spearman of semantic_similarity against
the human scores of STS-B dev) and --memory (peak memory of a large run, measured in fresh child
processes: embedding.py re-executed with --memory-child). See embedding.py's docstring."""

from __future__ import annotations

import csv
import gc
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from _common import ROOT, max_rss_mib
from embedding_inputs import build_pairs, generate, load_chunks, read_golden
from embedding_scoring import BATCH, BERT_METRICS, SENTENCE_METRICS, per_case, score_pairs

from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.encoders import get_embedder
from raglake.embed.texts import collect_texts
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase

GOAL_MEMORY_GIB = 3.0
STSB_REFERENCE = 0.82
STSB = ROOT.parent / "shared" / "metaeval" / "stsb" / "stsb-en-dev.csv"
SCRIPT = Path(__file__).resolve().with_name("embedding.py")  # what the memory children run


# ---- STS-B ---------------------------------------------------------------------------------------


def find_stsb() -> Path | None:
    if STSB.exists():
        return STSB
    for p in sorted((ROOT / "tests" / "data").rglob("*sts*")) if (ROOT / "tests" / "data").exists() else ():
        if p.suffix in (".csv", ".tsv") and p.is_file():
            return p
    return None


def run_stsb(embedder) -> list[str]:
    from scipy.stats import pearsonr, spearmanr

    path = find_stsb()
    if path is None:
        return [f"STS-B: skipped, {STSB} is missing (and no sts*.csv under tests/data)"]
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if len(r) >= 3]
    if rows and not _is_number(rows[0][2]):
        rows = rows[1:]  # a header line
    pairs = [
        (
            GoldenCase(id=f"stsb-{i:05d}", question=s1, reference_answer=s1),
            Capture(case_id=f"stsb-{i:05d}", answer=s2, abstained=False),
        )
        for i, (s1, s2, _) in enumerate(rows)
    ]
    human = {f"stsb-{i:05d}": float(r[2]) for i, r in enumerate(rows)}
    metrics = [get_metric("semantic_similarity"), get_metric("answer_correctness_emb")]
    t0 = time.perf_counter()
    encoder = TextEncoder(embedder, EmbeddingCache(None, embedder.key, embedder.device))
    scored = score_pairs(pairs, metrics, ScoringConfig(), encoder=encoder)
    seconds = time.perf_counter() - t0
    values = per_case(scored.scores)
    sim, raw = values.get("semantic_similarity", {}), values.get("answer_correctness_emb", {})
    ids = [cid for cid in human if cid in sim]
    gold = [human[c] for c in ids]
    rho = spearmanr([sim[c] for c in ids], gold).statistic
    rho_raw = spearmanr([raw[c] for c in ids], gold).statistic
    r_raw = pearsonr([raw[c] for c in ids], gold).statistic
    clipped = sum(raw[c] < 0 for c in ids)
    # the raw model directly, as a check that the lake path adds nothing
    check = pairs[:200]
    st = embedder.sentence_transformer
    v1 = st.encode([p[0].reference_answer for p in check], batch_size=64, normalize_embeddings=True)
    v2 = st.encode([p[1].answer for p in check], batch_size=64, normalize_embeddings=True)
    direct = (v1 * v2).sum(axis=1)
    diff = max(abs(float(d) - raw[p[0].id]) for d, p in zip(direct, check) if p[0].id in raw)
    return [
        f"STS-B dev: {path}  ({len(rows):,} pairs, {len(ids):,} scored, human score 0-5; "
        f"{encoder.stats.encoded:,} distinct texts encoded, {seconds:.1f} s)",
        f"{'  Spearman semantic_similarity':<46}{rho:>8.5f}   (raglake: max(0, cos))",
        f"{'  Spearman raw cosine (answer_correctness_emb)':<46}{rho_raw:>8.5f}   (no clipping; {clipped} pair(s) < 0)",
        f"{'  Pearson raw cosine':<46}{r_raw:>8.5f}",
        f"{'  reference (all-MiniLM-L6-v2 on STS-B)':<46}{STSB_REFERENCE:>8.2f}   "
        "(as reported for the model; MTEB's STSBenchmark figure is on the test split)",
        f"{'  max |raglake cos - direct model cos|':<46}{diff:>8.1e}   (first {len(check)} pairs)",
    ]


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


# ---- memory (child process) ----------------------------------------------------------------------


def rss_now_mib() -> float:
    """Resident memory right now (Linux /proc; nan elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def memory_child(args) -> int:
    """One memory pass in this (fresh) process; prints 'key=value' lines the parent reports."""
    traced = args.memory_child == "traced"
    embedder = get_embedder(device=args.device)
    embedder.model.encode(["warm up"] * 8)
    rss_model, rss_model_now = max_rss_mib(), rss_now_mib()
    rng = random.Random(args.seed + 7)
    golden = read_golden()
    chunks, _ = load_chunks(embedder, args.distinct_chunks, random.Random(args.seed))
    base_cases, base_caps = generate(args.memory_pool, args.chunks, chunks, golden, args.seed + 1)
    n = args.memory_cases
    cases, captures = [], []
    for start in range(0, n, BATCH):  # each batch draws from 10 base cases: heavy repetition
        pool = rng.sample(range(len(base_cases)), min(10, len(base_cases)))
        for i in range(start, min(n, start + BATCH)):
            j = rng.choice(pool) if i - start >= len(pool) else pool[i - start]  # every base case appears
            cid = f"mem-{i:06d}"
            cases.append({**base_cases[j], "id": cid})
            captures.append({**base_caps[j], "case_id": cid})
    if traced:
        gc.collect()
        tracemalloc.start()
    t0 = time.perf_counter()
    pairs = build_pairs(cases, captures, via_json=True)
    del cases, captures
    build_s = time.perf_counter() - t0
    rss_built = rss_now_mib()
    metrics = [get_metric(m) for m in (*SENTENCE_METRICS, *BERT_METRICS)]
    config = ScoringConfig(k=args.chunks)
    with tempfile.TemporaryDirectory(prefix="raglake-embcache-") as tmp:
        t1 = time.perf_counter()
        texts = collect_texts(pairs, config.k, metrics)
        encoder = TextEncoder(embedder, EmbeddingCache(tmp, embedder.key, embedder.device))
        encoder.encode(texts, caller="metrics")
        t2 = time.perf_counter()
        rss_encoded = rss_now_mib()
        scored = score_pairs(pairs, metrics, config, encoder=encoder).tables()  # kept as Arrow tables
        t3 = time.perf_counter()
        rss_scored = rss_now_mib()
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else float("nan")
    if traced:
        tracemalloc.stop()
    ok = scored["scores"].column("status").to_pylist().count("ok")
    print(f"mode={args.memory_child}")
    print(f"cases={len(pairs)}")
    print(f"distinct_texts={len(texts)}")
    print(f"distinct_answer_ref={len({t for c, x in pairs for t in (c.reference_answer, x.answer) if t})}")
    print(f"encoded={encoder.stats.encoded}")
    print(f"score_rows={scored['scores'].num_rows}")
    print(f"ok_rows={ok}")
    print(f"chunk_rows={scored['chunks'].num_rows}")
    print(f"build_s={build_s:.2f}")
    print(f"encode_s={t2 - t1:.2f}")
    print(f"score_s={t3 - t2:.2f}")
    print(f"rss_model_mib={rss_model:.0f}")
    print(f"rss_now_model_mib={rss_model_now:.0f}")
    print(f"rss_now_built_mib={rss_built:.0f}")
    print(f"rss_now_encoded_mib={rss_encoded:.0f}")
    print(f"rss_now_scored_mib={rss_scored:.0f}")
    print(f"rss_peak_mib={max_rss_mib():.0f}")
    print(f"tracemalloc_peak_mib={peak:.0f}")
    return 0


def run_memory(args) -> list[str]:
    results: dict[str, dict[str, str]] = {}
    for mode in ("untraced", "traced"):
        cmd = [
            sys.executable,
            str(SCRIPT),
            "--memory-child",
            mode,
            "--memory-cases",
            str(args.memory_cases),
            "--memory-pool",
            str(args.memory_pool),
            "--chunks",
            str(args.chunks),
            "--seed",
            str(args.seed),
            "--distinct-chunks",
            str(args.distinct_chunks),
            "--device",
            args.device,
        ]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            return [f"memory check ({mode}) failed with exit code {proc.returncode}:", proc.stderr[-3000:]]
        results[mode] = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        results[mode]["wall"] = f"{wall:.0f}"
    u, t = results["untraced"], results["traced"]
    rss_gib = float(u["rss_peak_mib"]) / 1024
    lines = [
        f"memory: {int(u['cases']):,} cases x {args.chunks} chunks, "
        f"{len(SENTENCE_METRICS) + len(BERT_METRICS)} embedding metrics (BERTScore P/R/F1 included), "
        f"batches of {BATCH}, on-disk cache in a fresh temp dir",
        f"  texts: {int(u['distinct_texts']):,} distinct (from {args.memory_pool:,} base cases; "
        f"{int(u['distinct_answer_ref']):,} distinct answers/references for BERTScore), {int(u['encoded']):,} encoded",
        f"  rows kept: {int(u['score_rows']):,} score rows ({int(u['ok_rows']):,} ok), "
        f"{int(u['chunk_rows']):,} chunk rows",
        f"  untraced child: build {float(u['build_s']):.0f} s, encode {float(u['encode_s']):.0f} s, "
        f"score {float(u['score_s']):.0f} s, wall {u['wall']} s",
        f"{'  peak RSS (ru_maxrss, untraced child)':<46}{float(u['rss_peak_mib']):>8.0f} MiB  = {rss_gib:.2f} GiB  "
        f"(goal < {GOAL_MEMORY_GIB:.0f} GiB: {'met' if rss_gib < GOAL_MEMORY_GIB else 'NOT met'})",
        f"{'    peak RSS once the model was loaded + warmed':<46}{float(u['rss_model_mib']):>8.0f} MiB  "
        f"(resident then: {float(u['rss_now_model_mib']):.0f} MiB)",
        f"{'    resident after building the cases':<46}{float(u['rss_now_built_mib']):>8.0f} MiB",
        f"{'    resident after the one encode':<46}{float(u['rss_now_encoded_mib']):>8.0f} MiB",
        f"{'    resident after scoring (rows kept)':<46}{float(u['rss_now_scored_mib']):>8.0f} MiB",
        f"{'  tracemalloc peak (traced child)':<46}{float(t['tracemalloc_peak_mib']):>8.0f} MiB  "
        f"(Python objects + numpy buffers from building the cases on; torch's tensors are not traced)",
        f"{'  peak RSS of the traced child':<46}{float(t['rss_peak_mib']):>8.0f} MiB  "
        "(includes tracemalloc's bookkeeping)",
    ]
    return lines
