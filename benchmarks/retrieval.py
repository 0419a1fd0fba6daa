"""Benchmark raglake's retrieval metrics (METRICS.md §2) against pytrec_eval and ranx, end to end from files.

    python benchmarks/retrieval.py [--cases N] [--chunks C] [--seed S] [--no-tracemalloc] [--profile N]

Builds N synthetic golden cases and captures (seeded; about 3 gold supports per case among 50
notes, heading paths of 2-3 segments, C retrieved chunks per capture) and writes them as files: a golden
set and a captures file in raglake's JSONL shape (heading paths written "A > B", as people write them),
and the same relevance as TREC qrels and run files. Then, each from its own files, all in this process:
- raglake, columnar: raglake.pipeline.scoring.score_files (bulk read, vectorised metrics, Arrow tables)
  with recall_any_at_k, recall_all_at_k, mrr_at_k, precision_at_k and ndcg_at_k at k=10, then the means;
- raglake, per case: the records read and validated into pydantic models (raglake.records), then
  score_batch (tests/rowpath.py: the per-case reference the tests hold the columnar path to), the means;
- pytrec_eval: parse_qrel / parse_run, P_10, recip_rank and ndcg_cut_10, the means;
- ranx: Qrels.from_file / Run.from_file, precision@10, mrr@10 and ndcg_burges@10 (numba's first-call
  compilation timed apart), the means.

Reported: each time and cases/second, the ratios raglake / pytrec_eval and raglake / ranx (end to end:
reading and model building or columnar reading included), peak memory (tracemalloc peak of a second,
traced pass of the per-case path; getrusage ru_maxrss), and whether the tools agree on the mean of each
metric and per case (the supports are all grade 1, so ndcg_at_k must equal ndcg_cut_10 and
ndcg_burges@10).

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
import json
import math
import os
import platform
import pstats
import random
import resource
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import get_metric  # noqa: E402
from raglake.pipeline.scoring import score_files  # noqa: E402
from raglake.records import read_records, validate_record  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402
from tests.rowpath import score_batch  # noqa: E402

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


def write_files(folder: Path, cases: list[dict], captures: list[dict], qrels, run) -> dict[str, Path]:
    """golden.jsonl and captures.jsonl (raglake's shape), qrels.txt and run.txt (TREC; docnos without spaces)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: folder / name for name in ("golden.jsonl", "captures.jsonl", "qrels.txt", "run.txt")}
    for name, rows in (("golden.jsonl", cases), ("captures.jsonl", captures)):
        with open(paths[name], "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    with open(paths["qrels.txt"], "w") as f:
        f.writelines(f"{q} 0 {d.replace(' ', '_')} {g}\n" for q, docs in qrels.items() for d, g in docs.items())
    with open(paths["run.txt"], "w") as f:
        for q, docs in run.items():
            f.writelines(f"{q} Q0 {d.replace(' ', '_')} {i + 1} {s} bench\n" for i, (d, s) in enumerate(docs.items()))
    return paths


def build_models(paths: dict[str, Path]) -> list[tuple[GoldenCase, Capture]]:
    """The per-case path's reading: every record validated into its pydantic model."""
    cases = [validate_record(r, GoldenCase, paths["golden.jsonl"]) for r in read_records(paths["golden.jsonl"])]
    captures = [validate_record(r, Capture, paths["captures.jsonl"]) for r in read_records(paths["captures.jsonl"])]
    return list(zip(cases, captures))


def raglake_score(pairs, metrics):
    return score_batch(pairs, metrics, ScoringConfig(k=K))


def raglake_columnar(paths: dict[str, Path], metrics) -> tuple[float, dict[str, list]]:
    t0 = time.perf_counter()
    scores = score_files(paths["golden.jsonl"], paths["captures.jsonl"], metrics, ScoringConfig(k=K)).tables()["scores"]
    columns = scores.select(["case_id", "metric", "value", "status"]).to_pydict()
    return time.perf_counter() - t0, columns


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


def run_pytrec_eval(paths: dict[str, Path]):
    import pytrec_eval

    t0 = time.perf_counter()
    with open(paths["qrels.txt"]) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(paths["run.txt"]) as f:
        run = pytrec_eval.parse_run(f)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"P_10", "recip_rank", "ndcg_cut_10"}).evaluate(run)
    names = ("P_10", "recip_rank", "ndcg_cut_10")
    per_metric = {m: {qid: q[m] for qid, q in per_query.items()} for m in names}
    seconds = time.perf_counter() - t0
    return seconds, per_metric


def run_ranx(paths: dict[str, Path]):
    """ranx from its TREC files (Qrels.from_file / Run.from_file), one thread."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba type-safety chatter
        import ranx

        names = [theirs for _, theirs in REFERENCE_NAMES.values()]
        t0 = time.perf_counter()
        qrels = ranx.Qrels.from_file(str(paths["qrels.txt"]), kind="trec")
        run = ranx.Run.from_file(str(paths["run.txt"]), kind="trec")
        arrays = ranx.evaluate(qrels, run, names, threads=1, return_mean=False, make_comparable=True)
        seconds = time.perf_counter() - t0
    ids = list(run.keys())
    return seconds, {m: dict(zip(ids, map(float, a))) for m, a in arrays.items()}


# ---- memory ----------------------------------------------------------------------------------


def max_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def traced_pass(paths: dict[str, Path], metrics) -> tuple[float, float, float, float]:
    """tracemalloc over a second run of each raglake path: (MiB the models hold, peak MiB of the per-case
    path, peak MiB of the columnar path, seconds under tracing)."""
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    pairs = build_models(paths)
    models_mib = tracemalloc.get_traced_memory()[0] / 2**20
    batch = raglake_score(pairs, metrics)
    per_case_peak = tracemalloc.get_traced_memory()[1] / 2**20
    del pairs, batch
    gc.collect()
    tracemalloc.reset_peak()
    raglake_columnar(paths, metrics)
    columnar_peak = tracemalloc.get_traced_memory()[1] / 2**20
    seconds = time.perf_counter() - t0
    tracemalloc.stop()
    gc.collect()
    return models_mib, per_case_peak, columnar_peak, seconds


def profile_columnar(paths: dict[str, Path], metrics, top: int = 14) -> str:
    prof = cProfile.Profile()
    prof.enable()
    raglake_columnar(paths, metrics)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---- report ----------------------------------------------------------------------------------


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=10, help="retrieved chunks per capture (default 10)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--no-tracemalloc", action="store_true", help="skip the traced second pass")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="also cProfile the columnar path on N cases")
    return ap.parse_args(argv)


def _timed(fn, *args):
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    n = args.cases
    metrics = [get_metric(m) for m in METRICS]
    with tempfile.TemporaryDirectory() as folder:
        gen_s, data = _timed(generate, n, args.chunks, args.seed)
        paths = write_files(Path(folder), *data)
        small = write_files(Path(folder) / "warm", *generate(50, args.chunks, args.seed + 1)) if n else paths
        raglake_columnar(small, metrics)  # first-call costs (imports, pyarrow's pandas shim) out of the timing
        run_pytrec_eval(small)
        ranx_warm_s, _ = run_ranx(small)  # numba compiles on the first calls
        del data
        col_s, columns = raglake_columnar(paths, metrics)
        build_s, pairs = _timed(build_models, paths)
        score_s, batch = _timed(raglake_score, pairs, metrics)
        rss_after_raglake = max_rss_mib()
        ours, ours_per_case = raglake_means(batch.scores)
        theirs_col, _ = raglake_means(columns)
        rows = len(batch.scores["metric"])
        del batch, pairs
        trec_s, trec_per_case = run_pytrec_eval(paths)
        ranx_s, ranx_per_case = run_ranx(paths)
        profile_text = profile_columnar(paths, metrics) if args.profile else ""
        traced = None if args.no_tracemalloc else traced_pass(paths, metrics)
        sizes = sum(p.stat().st_size for p in paths.values() if p.suffix == ".jsonl") / 2**20
    times = {"columnar": col_s, "per_case": build_s + score_s, "build": build_s, "score": score_s}
    agree = _print_report(args, gen_s, sizes, rows, times, (trec_s, ranx_s, ranx_warm_s), rss_after_raglake, traced)
    ok = _print_agreement(ours, ours_per_case, theirs_col, trec_per_case, ranx_per_case) and agree
    if profile_text:
        print(f"cProfile of raglake's columnar path, end to end, on {n:,} cases (top by own time):")
        print(profile_text)
    return 0 if ok else 1


def _print_report(args, gen_s, jsonl_mib, rows, times, refs, rss_after, traced) -> bool:
    n, w = args.cases, 78
    trec_s, ranx_s, ranx_warm_s = refs
    print("=" * w)
    print(f"raglake retrieval benchmark: {n:,} cases x {args.chunks} chunks, k={K}, seed {args.seed}")
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; end to end from files")
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    print("-" * w)
    print(f"{'generate data, write files':<36}{gen_s:>8.2f} s  (raglake JSONL {jsonl_mib:.0f} MiB)")
    print(f"{'raglake columnar (score_files)':<36}{times['columnar']:>8.2f} s  {n / times['columnar']:>10,.0f} cases/s")
    print(f"{'raglake per case: read + models':<36}{times['build']:>8.2f} s  {n / times['build']:>10,.0f} cases/s")
    print(f"{'raglake per case: score_batch':<36}{times['score']:>8.2f} s  ({rows:,} score rows)")
    print(f"{'pytrec_eval (parse + 3 measures)':<36}{trec_s:>8.2f} s  {n / trec_s:>10,.0f} cases/s")
    print(f"{'ranx (from files; warm-up apart)':<36}{ranx_s:>8.2f} s  {n / ranx_s:>10,.0f} cases/s")
    print(f"{'  ranx first-call warm-up':<36}{ranx_warm_s:>8.2f} s")
    for name, seconds in (("columnar", times["columnar"]), ("per case", times["per_case"])):
        print(f"{f'ratio raglake {name} / pytrec_eval':<36}{seconds / trec_s:>8.1f} x")
        print(f"{f'ratio raglake {name} / ranx':<36}{seconds / ranx_s:>8.1f} x")
    print("-" * w)
    print("memory")
    print(f"{'  ru_maxrss after raglake':<36}{rss_after:>8.0f} MiB")
    print(f"{'  ru_maxrss at the end':<36}{max_rss_mib():>8.0f} MiB  (+ numba/ranx, traced pass)")
    if traced:
        models_mib, per_case_peak, columnar_peak, traced_s = traced
        print(f"{'  tracemalloc: models held':<36}{models_mib:>8.0f} MiB  ({models_mib * 2**20 / n:,.0f} B/case)")
        print(f"{'  tracemalloc: peak per case':<36}{per_case_peak:>8.0f} MiB")
        print(f"{'  tracemalloc: peak columnar':<36}{columnar_peak:>8.0f} MiB  (traced pass: {traced_s:.0f} s)")
    print("-" * w)
    return True


def _print_agreement(ours, ours_per_case, columnar, trec_per_case, ranx_per_case) -> bool:
    print(f"{'mean over ok cases':<18}{'raglake':>10}{'pytrec_eval':>13}{'ranx':>10}  agree(1e-6)  max per-case |diff|")
    trec_means = {m: math.fsum(v.values()) / len(v) for m, v in trec_per_case.items()}
    ranx_means = {m: math.fsum(v.values()) / len(v) for m, v in ranx_per_case.items()}
    same_paths = all(columnar[m][:2] == ours[m][:2] for m in METRICS)
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
    print(f"columnar and per-case means identical: {'yes' if same_paths else 'NO'}")
    print("=" * 78)
    return ndcg_ok and same_paths


if __name__ == "__main__":
    sys.exit(main())
