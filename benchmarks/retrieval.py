"""Benchmark raglake's retrieval metrics (METRICS.md §2) against pytrec_eval and ranx.

    python benchmarks/retrieval.py [--cases N] [--chunks C] [--seed S] [--no-tracemalloc] [--profile]

Builds N synthetic golden cases and captures (seeded; about 3 gold supports per case among 50
notes, heading paths of 2-3 segments, C retrieved chunks per capture), scores them with
recall_any_at_k, recall_all_at_k, mrr_at_k, precision_at_k and ndcg_at_k through
raglake.pipeline.scoring.score_batch at k=10, and scores the same qrels/run with pytrec_eval (P_10,
recip_rank, ndcg_cut_10) and ranx (precision@10, mrr@10, ndcg_burges@10), all in this one process.

Reported: pydantic build/validate time, raglake scoring time and cases/second, the time ratios
raglake / pytrec_eval and raglake / ranx, peak memory (tracemalloc peak of a second, traced pass;
getrusage ru_maxrss of the process), and whether the three agree on the mean of each metric (the
supports are all grade 1, so ndcg_at_k must equal ndcg_cut_10 and ndcg_burges@10).

The data is built so that anchor matching and docno equality credit the same chunks: a case's
supports lie in distinct notes, at most one chunk matches each support (its heading equals the
support's or extends it by one segment), and the other chunks are distinct anchors that match
nothing (some are near misses: the same note, a sibling section, or the parent of a 3-segment
support). Each chunk's docno for pytrec_eval/ranx is the key of the support it matches, or its own
anchor. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import math
import os
import platform
import pstats
import random
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import get_metric  # noqa: E402
from raglake.pipeline.scoring import score_batch  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402

K = 10
N_NOTES = 50
N_SECTIONS = 12  # "Sec 1" vs "Sec 10"/"Sec 11": segment-level, not string-prefix, matching matters
N_PARTS = 4
METRICS = ("recall_any_at_k", "recall_all_at_k", "mrr_at_k", "precision_at_k", "ndcg_at_k")
# raglake metric -> (pytrec_eval measure, ranx metric)
REFERENCE_NAMES = {
    "precision_at_k": ("P_10", "precision@10"),
    "mrr_at_k": ("recip_rank", "mrr@10"),
    "ndcg_at_k": ("ndcg_cut_10", "ndcg_burges@10"),
}
NOTES = [f"area-{i % 5}/note-{i:02d}.md" for i in range(N_NOTES)]


# ---- synthetic data --------------------------------------------------------------------------


def _heading(note: int, section: int, part: int | None = None) -> str:
    h = f"Note {note} > Sec {section}"
    return h if part is None else f"{h} > Part {part}"


def generate(n_cases: int, n_chunks: int, seed: int):
    """Raw JSON-like dicts for cases and captures, plus the qrels/run the reference tools score."""
    rng = random.Random(seed)
    cases, captures = [], []
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for c in range(n_cases):
        cid = f"case-{c:06d}"
        n_sup = rng.choice((2, 3, 3, 3, 4))
        sup_notes = rng.sample(range(N_NOTES), n_sup)
        supports, keys = [], []
        for note in sup_notes:
            section = rng.randrange(N_SECTIONS)
            part = rng.randrange(N_PARTS) if rng.random() < 0.4 else None
            heading = _heading(note, section, part)
            supports.append({"rel_path": NOTES[note], "heading_path": heading})
            keys.append(f"{NOTES[note]}#{heading}")
        groups = [[0], list(range(1, n_sup))]

        # which supports are retrieved (at most one chunk each), and where
        slots = list(range(n_chunks))
        rng.shuffle(slots)
        chunk_at: dict[int, tuple[str, str, str]] = {}  # rank index -> (rel_path, heading, docno)
        for i, sup in enumerate(supports):
            if rng.random() < 0.45:
                heading = sup["heading_path"]
                if heading.count(">") == 1 and rng.random() < 0.5:
                    heading += f" > Part {rng.randrange(N_PARTS)}"  # a deeper chunk under the support
                chunk_at[slots.pop()] = (sup["rel_path"], heading, keys[i])
        used = {d for _, _, d in chunk_at.values()}
        sup_by_note = {note: supports[i]["heading_path"] for i, note in enumerate(sup_notes)}
        for slot in slots:  # distractors: distinct anchors matching no support
            while True:
                note = rng.randrange(N_NOTES) if rng.random() < 0.7 else rng.choice(sup_notes)
                sup_heading = sup_by_note.get(note)
                if sup_heading is not None and sup_heading.count(">") == 2 and rng.random() < 0.3:
                    heading = sup_heading.rsplit(" > ", 1)[0]  # the parent of a 3-segment support
                else:
                    section = rng.randrange(N_SECTIONS)
                    heading = _heading(note, section, rng.randrange(N_PARTS) if rng.random() < 0.5 else None)
                    if sup_heading is not None and (heading + " >").startswith(sup_heading + " >"):
                        continue  # would match the support
                docno = f"{NOTES[note]}#{heading}"
                if docno not in used:
                    used.add(docno)
                    chunk_at[slot] = (NOTES[note], heading, docno)
                    break

        scores = sorted((rng.random() for _ in range(n_chunks)), reverse=True)
        retrieved, ranked = [], {}
        for r in range(n_chunks):
            rel_path, heading, docno = chunk_at[r]
            score = round(scores[r] + (n_chunks - r), 6)  # strictly decreasing: no tie-order questions
            retrieved.append(
                {
                    "rank": r + 1,
                    "rel_path": rel_path,
                    "heading_path": heading,
                    "text": f"chunk {r} of {cid}: {heading}",
                    "score": score,
                }
            )
            if r < K:
                ranked[docno] = score
        cases.append(
            {
                "id": cid,
                "question": f"Synthetic question {c}?",
                "gold_supports": supports,
                "required_support_groups": groups,
            }
        )
        captures.append({"case_id": cid, "answer": f"Synthetic answer {c}.", "retrieved": retrieved})
        qrels[cid] = dict.fromkeys(keys, 1)
        run[cid] = ranked
    return cases, captures, qrels, run


def build_models(cases: list[dict], captures: list[dict]) -> list[tuple[GoldenCase, Capture]]:
    return [(GoldenCase.model_validate(c), Capture.model_validate(x)) for c, x in zip(cases, captures)]


def raglake_score(pairs, metrics):
    return score_batch(pairs, metrics, ScoringConfig(k=K))


def raglake_means(scores: dict[str, list]) -> tuple[dict[str, tuple[float, int, int]], dict[str, dict[str, float]]]:
    """(metric -> (mean over ok rows, n ok, n other), metric -> {case_id: value} for ok rows)."""
    per_case: dict[str, dict[str, float]] = {m: {} for m in METRICS}
    other = dict.fromkeys(METRICS, 0)
    for cid, name, value, status in zip(scores["case_id"], scores["metric"], scores["value"], scores["status"]):
        if status == "ok":
            per_case[name][cid] = value
        else:
            other[name] += 1
    means = {m: (math.fsum(v.values()) / len(v) if v else math.nan, len(v), other[m]) for m, v in per_case.items()}
    return means, per_case


# ---- reference implementations ---------------------------------------------------------------


def run_pytrec_eval(qrels, run):
    import pytrec_eval

    t0 = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"P_10", "recip_rank", "ndcg_cut_10"})
    per_query = evaluator.evaluate(run)
    seconds = time.perf_counter() - t0
    names = ("P_10", "recip_rank", "ndcg_cut_10")
    per_metric = {m: {qid: q[m] for qid, q in per_query.items()} for m in names}
    return seconds, per_metric


def run_ranx(qrels, run):
    """ranx on plain dicts (its cheapest entry point: hashed doc ids, a numba typed list), one thread."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter
        import ranx

        names = [theirs for _, theirs in REFERENCE_NAMES.values()]
        t0 = time.perf_counter()
        warm_q = {f"w{i}": {"a": 1, "b": 1} for i in range(12)}
        warm_r = {f"w{i}": {"a": 0.9, "c": 0.5, "b": 0.1} for i in range(12)}
        ranx.evaluate(warm_q, warm_r, names, threads=1)  # numba compiles on the first call: keep it out
        warmup = time.perf_counter() - t0
        t0 = time.perf_counter()
        arrays = ranx.evaluate(qrels, run, names, threads=1, return_mean=False)
        seconds = time.perf_counter() - t0
    # per-query arrays come back in the dicts' query order (qrels and run list the same cases in order)
    assert list(qrels) == list(run)
    return seconds, warmup, {m: dict(zip(run, map(float, a))) for m, a in arrays.items()}


# ---- memory ----------------------------------------------------------------------------------


def max_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def traced_pass(cases, captures, metrics) -> tuple[float, float, float]:
    """tracemalloc over a second build + score of the same data: (MiB held by the models,
    peak MiB during build + scoring, seconds under tracing). The raw dicts are not counted."""
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    pairs = build_models(cases, captures)
    models_mib = tracemalloc.get_traced_memory()[0] / 2**20
    batch = raglake_score(pairs, metrics)
    peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
    seconds = time.perf_counter() - t0
    tracemalloc.stop()
    del pairs, batch
    gc.collect()
    return models_mib, peak_mib, seconds


def profile_scoring(pairs, metrics, top: int = 14) -> str:
    prof = cProfile.Profile()
    prof.enable()
    raglake_score(pairs, metrics)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---- report ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=10, help="retrieved chunks per capture (default 10)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-tracemalloc", action="store_true", help="skip the traced second pass")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile raglake's scoring of the first N cases and print the top functions",
    )
    args = ap.parse_args(argv)
    n = args.cases
    metrics = [get_metric(m) for m in METRICS]

    t0 = time.perf_counter()
    cases, captures, qrels, run = generate(n, args.chunks, args.seed)
    gen_s = time.perf_counter() - t0

    gc.collect()
    t0 = time.perf_counter()
    pairs = build_models(cases, captures)
    build_s = time.perf_counter() - t0

    gc.collect()
    t0 = time.perf_counter()
    batch = raglake_score(pairs, metrics)
    score_s = time.perf_counter() - t0
    rss_after_raglake = max_rss_mib()
    ours, ours_per_case = raglake_means(batch.scores)
    rows = len(batch.scores["metric"])
    del batch
    gc.collect()

    trec_s, trec_per_case = run_pytrec_eval(qrels, run)
    ranx_s, ranx_warm_s, ranx_per_case = run_ranx(qrels, run)
    trec_means = {m: math.fsum(v.values()) / len(v) for m, v in trec_per_case.items()}
    ranx_means = {m: math.fsum(v.values()) / len(v) for m, v in ranx_per_case.items()}

    profile_text = profile_scoring(pairs[: args.profile], metrics) if args.profile else ""
    del pairs
    gc.collect()
    traced = None if args.no_tracemalloc else traced_pass(cases, captures, metrics)

    # ---- print ----
    w = 78
    print("=" * w)
    print(f"raglake retrieval benchmark: {n:,} cases x {args.chunks} chunks, k={K}, seed {args.seed}")
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; every tool single-threaded"
    )
    print("-" * w)
    print(f"{'generate raw dicts':<34}{gen_s:>9.2f} s")
    print(f"{'build/validate pydantic models':<34}{build_s:>9.2f} s  {n / build_s:>10,.0f} cases/s")
    print(f"{'raglake score_batch (5 metrics)':<34}{score_s:>9.2f} s  {n / score_s:>10,.0f} cases/s")
    print(f"  ({rows:,} score rows; models built beforehand, as the tools below get ready dicts)")
    print(f"{'pytrec_eval (3 measures)':<34}{trec_s:>9.2f} s  {n / trec_s:>10,.0f} cases/s")
    print(f"{'ranx (3 metrics; warm-up excluded)':<34}{ranx_s:>9.2f} s  {n / ranx_s:>10,.0f} cases/s")
    print(f"{'  ranx first-call warm-up':<34}{ranx_warm_s:>9.2f} s")
    print(f"{'ratio raglake / pytrec_eval':<34}{score_s / trec_s:>9.1f} x")
    print(f"{'ratio raglake / ranx':<34}{score_s / ranx_s:>9.1f} x")
    print("-" * w)
    print("memory")
    print(f"{'  ru_maxrss after raglake scoring':<34}{rss_after_raglake:>9.0f} MiB  (raw dicts + models + scores)")
    print(f"{'  ru_maxrss at the end':<34}{max_rss_mib():>9.0f} MiB  (+ numba/ranx, traced pass)")
    if traced:
        models_mib, peak_mib, traced_s = traced
        print(f"{'  tracemalloc: models held':<34}{models_mib:>9.0f} MiB  ({models_mib * 2**20 / n:,.0f} B/case)")
        print(f"{'  tracemalloc: peak build+score':<34}{peak_mib:>9.0f} MiB  (a 2nd, traced pass: {traced_s:.0f} s)")
    print("-" * w)
    print(f"{'mean over ok cases':<18}{'raglake':>10}{'pytrec_eval':>13}{'ranx':>10}  agree(1e-6)  max per-case |diff|")
    for m in METRICS:
        value, n_ok, n_other = ours[m]
        if m in REFERENCE_NAMES:
            tname, rname = REFERENCE_NAMES[m]
            t, r = trec_means[tname], ranx_means[rname]
            agree = "yes" if abs(value - t) <= 1e-6 and abs(value - r) <= 1e-6 else "NO"
            diff = max(
                max(abs(v - trec_per_case[tname][cid]), abs(v - ranx_per_case[rname][cid]))
                for cid, v in ours_per_case[m].items()
            )
            print(f"{m:<18}{value:>10.6f}{t:>13.6f}{r:>10.6f}  {agree:<11}  {diff:.1e}")
        else:
            print(f"{m:<18}{value:>10.6f}{'-':>13}{'-':>10}  (n ok {n_ok:,}, other {n_other:,})")
    ndcg_ok = (
        abs(ours["ndcg_at_k"][0] - trec_means["ndcg_cut_10"]) <= 1e-6
        and abs(ours["ndcg_at_k"][0] - ranx_means["ndcg_burges@10"]) <= 1e-6
    )
    print(f"mean ndcg agreement (grade-1 supports): {'OK' if ndcg_ok else 'MISMATCH'}")
    print("=" * w)
    if profile_text:
        print(f"cProfile of raglake score_batch on {min(args.profile, n):,} cases (top by own time):")
        print(profile_text)
    return 0 if ndcg_ok else 1


if __name__ == "__main__":
    sys.exit(main())
