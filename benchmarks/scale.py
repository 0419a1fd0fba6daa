"""Scale benchmark, library path: raglake from its files to staged Parquet against pytrec_eval from its
files to means, on the same qrels and runs (issue 12).

    python benchmarks/scale.py [--cases N] [--seed S] [--keep DIR] [--threads N]

Generates replay data (seeded, N cases, 10 chunks each, k = 10): a golden set and a captures file in
raglake's canonical JSONL shape (GoldenCase / Capture `model_dump_json` lines), and the same relevance
as TREC files (qrels: one line per gold support; run: the top 10 of each capture). About 8 % of the cases
are unanswerable (no supports, the target abstains or not), a quarter carry human answer labels, and
answers vary (citations, "don't know", non-ASCII) so that the label and abstention families do real work.

Timed, each after a warm-up on a few cases (imports and first-call costs out of both), --repeat times
alternately (the best time of each is compared; the machine is shared):
- raglake: read both files in columns (raglake.columnar), score the retrieval, label and abstention
  families vectorised (raglake.pipeline.scoring.score_columnar), build the scores, labels, chunks and
  cases tables (the cases rows from the columns and the files' lines, raglake.pipeline.case_table) and
  write each with pq.write_table as the score task stages them (STAGED_PARQUET; here in threads);
- pytrec_eval: parse_qrel and parse_run on the TREC files, evaluate P_10, recip_rank and ndcg_cut_10,
  and the mean of each;
- the JSON parse floor: pyarrow's JSON reader alone on the two files, as the raglake path's read calls it,
  so that what raglake's own work costs beyond the parse is printed beside the ratio.
Printed: both times, the throughput ratio (pytrec_eval time / raglake time; the goal is ≥ 1.0), the
largest per-case difference of P@10, RR and nDCG@10 (the goal is ≤ 1e-9: supports are grade 1, so
raglake's nDCG is trec's), and the machine's load (uptime). Nothing here asserts on time.

The CLI, 1M-case and Dask parts of issue 12's scale benchmark live in benchmarks/cli_scale.py, which can
reuse `write_replay` below for its data. Issue 29's like-for-like figures are benchmarks/same_input.py's.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from raglake.columnar.batch import ColumnarBatch  # noqa: E402
from raglake.columnar.lines import read_lines, read_table  # noqa: E402
from raglake.columnar.schema import GOLDEN_FREE_FORM, capture_schema, golden_schema  # noqa: E402
from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import Metric, all_metrics  # noqa: E402
from raglake.pipeline.case_table import cases_table_from_columns  # noqa: E402
from raglake.pipeline.scoring import score_columnar  # noqa: E402
from raglake.pipeline.staging import STAGED_PARQUET  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402

K = 10
FAMILIES = ("retrieval", "label", "abstention")
N_NOTES, N_SECTIONS, N_PARTS = 60, 12, 4
NOTES = [f"area-{i % 6}/note-{i:02d}.md" for i in range(N_NOTES)]
REFERENCE = {"precision_at_k": "P_10", "mrr_at_k": "recip_rank", "ndcg_at_k": "ndcg_cut_10"}
ANSWERS = (
    "The answer is in the notes, section {s}.",
    "Postgres {s} runs it [1].",
    "I don't know.",
    "It was moved on day {s}; see {path}.",
    "Das Café öffnet um {s} Uhr — laut Notiz.",
    "It doesn\u2019t say; cannot determine.",
)
LABELS = ("support_present", "helpful", "incomplete", "response_on_topic")


# ---- replay data -----------------------------------------------------------------------------------------


def _heading(note: int, section: int, part: int | None) -> list[str]:
    return [f"Note {note}", f"Sec {section}"] + ([] if part is None else [f"Part {part}"])


def _case(rng: random.Random, c: int) -> tuple[dict, dict, dict[str, int], dict[str, float]]:
    """One golden case, its capture (canonical field order), qrels and run."""
    cid = f"case-{c:07d}"
    answerable = rng.random() >= 0.08
    sup_notes = rng.sample(range(N_NOTES), rng.choice((2, 3, 3, 4))) if answerable else []
    supports, keys = [], []
    for note in sup_notes:
        heading = _heading(note, rng.randrange(N_SECTIONS), rng.randrange(N_PARTS) if rng.random() < 0.4 else None)
        supports.append(
            {"rel_path": NOTES[note], "heading_path": heading, "snippets": [], "date": None, "required": False}
        )
        keys.append(f"{NOTES[note]}#{'>'.join(heading)}")
    slots = list(range(10))
    rng.shuffle(slots)
    chunk_at: dict[int, tuple[str, list[str], str]] = {}
    for i, sup in enumerate(supports):
        if rng.random() < 0.45:
            heading = sup["heading_path"] + (
                [f"Part {rng.randrange(N_PARTS)}"] if len(sup["heading_path"]) == 2 and rng.random() < 0.5 else []
            )
            chunk_at[slots.pop()] = (sup["rel_path"], heading, keys[i])
    used = {d for _, _, d in chunk_at.values()}
    sup_heads = {n: supports[i]["heading_path"] for i, n in enumerate(sup_notes)}
    for slot in slots:  # distractors: distinct anchors that match no support
        while True:
            note = rng.randrange(N_NOTES)
            heading = _heading(note, rng.randrange(N_SECTIONS), rng.randrange(N_PARTS) if rng.random() < 0.5 else None)
            sup = sup_heads.get(note)
            docno = f"{NOTES[note]}#{'>'.join(heading)}"
            if (sup is None or heading[: len(sup)] != sup) and docno not in used:
                used.add(docno)
                chunk_at[slot] = (NOTES[note], heading, docno)
                break
    scores = sorted((rng.random() for _ in range(10)), reverse=True)
    retrieved, run = [], {}
    for r in range(10):
        rel_path, heading, docno = chunk_at[r]
        score = round(scores[r] + (10 - r), 6)
        retrieved.append(
            {
                "rel_path": rel_path,
                "heading_path": heading,
                "rank": r + 1,
                "text": f"chunk {r} of {cid}: {' / '.join(heading)}",
                "score": score,
                "chunk_id": None,
            }
        )
        run[docno] = score
    answer = rng.choice(ANSWERS).format(s=rng.randrange(100), path=NOTES[rng.randrange(N_NOTES)])
    abstained = rng.choice((None, None, True, False)) if not answerable else None
    labels = None
    if rng.random() < 0.25:
        labels = {"chunks": [], "answers": [_answer_label(rng)]}
    case = {
        "id": cid, "question": f"Synthetic question {c}?", "reference_answer": None, "answerable": answerable,
        "category": None, "difficulty": None, "tags": [], "vault": None,
        "expected_action": "answer" if answerable else "refuse", "gold_supports": supports,
        "required_support_groups": [[0], list(range(1, len(supports)))] if len(supports) > 1 else [],
        "recency_conflict_rule": None, "labels": labels, "metadata": {},
    }  # fmt: skip
    capture = {
        "case_id": cid, "answer": answer, "abstained": abstained, "references": [], "retrieved": retrieved,
        "method": "replay", "status": "ok", "error": None,
        "latency_ms": {"folder_selection": None, "retrieval": 12.0, "generation": 800.0, "total": 812.0, "wall": None},
        "folder_mode": None, "selected_folders": [], "attempts": None,
    }  # fmt: skip
    return case, capture, dict.fromkeys(keys, 1), run


def _answer_label(rng: random.Random) -> dict:
    label = dict.fromkeys(
        (
            "support_present", "unsupported_claim_present", "contradicted_claim_present", "source_cited",
            "fabricated_source", "proper_action", "response_on_topic", "helpful", "incomplete", "unsafe_content",
            "acknowledges_conflict",
        )
    )  # fmt: skip
    for name in LABELS:
        label[name] = rng.randrange(2)
    return {"method": None, "answer_sha256": None, **label}


def write_replay(folder: Path, n: int, seed: int) -> dict[str, Path]:
    """golden.jsonl and captures.jsonl (raglake's canonical shape), qrels.txt and run.txt (TREC)."""
    rng = random.Random(seed)
    paths = {name: folder / name for name in ("golden.jsonl", "captures.jsonl", "qrels.txt", "run.txt")}
    with (
        open(paths["golden.jsonl"], "wb") as g,
        open(paths["captures.jsonl"], "wb") as c,
        open(paths["qrels.txt"], "w") as q,
        open(paths["run.txt"], "w") as r,
    ):
        for i in range(n):
            case, capture, qrels, run = _case(rng, i)
            g.write(orjson.dumps(case) + b"\n")
            c.write(orjson.dumps(capture) + b"\n")
            q.writelines(f"{case['id']} 0 {_docno(d)} {rel}\n" for d, rel in qrels.items())
            r.writelines(f"{case['id']} Q0 {_docno(d)} {j + 1} {s} replay\n" for j, (d, s) in enumerate(run.items()))
    _check_canonical(paths)
    return paths


def _docno(key: str) -> str:
    return key.replace(" ", "_")


def _check_canonical(paths: dict[str, Path]) -> None:
    """The first lines are exactly what the models dump (so the files are in raglake's staged shape)."""
    for name, model in (("golden.jsonl", GoldenCase), ("captures.jsonl", Capture)):
        with open(paths[name], "rb") as f:
            for _, line in zip(range(50), f):
                line = line.rstrip(b"\n")
                assert model.model_validate_json(line).model_dump_json().encode() == line, (name, line[:200])


# ---- the two timed paths ---------------------------------------------------------------------------------


def raglake_to_parquet(
    paths: dict[str, Path], out: Path, metrics: list[Metric] | None = None
) -> tuple[float, dict[str, pa.Table], dict[str, float]]:
    """(seconds, the tables, seconds per stage: read, score, write); `metrics` default: the retrieval, label
    and abstention families (benchmarks/same_input.py asks for three metrics only)."""
    metrics = metrics if metrics is not None else [m for m in all_metrics("case") if m.family in FAMILIES]
    t0 = time.perf_counter()
    batch = ColumnarBatch.from_files(paths["golden.jsonl"], paths["captures.jsonl"])
    t1 = time.perf_counter()
    tables = score_columnar(batch, metrics, ScoringConfig(k=K)).tables()
    lines = batch.file_lines(paths["golden.jsonl"], paths["captures.jsonl"])
    tables["cases"] = cases_table_from_columns(batch, *lines)  # the score task stages it too
    t2 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(tables)) as pool:  # the Parquet writer leaves the GIL
        list(pool.map(lambda kv: pq.write_table(kv[1], out / f"{kv[0]}.parquet", **STAGED_PARQUET), tables.items()))
    t3 = time.perf_counter()
    return t3 - t0, tables, {"read": t1 - t0, "score": t2 - t1, "write": t3 - t2}


def json_parse_floor(paths: dict[str, Path]) -> float:
    """Seconds for pyarrow's JSON reader alone to read the two files into tables, side by side, as the
    raglake path's read does (raglake.columnar.lines.read_table, with the same schemas): the floor of any
    path that starts from these JSONL files with this reader, before any work of raglake's own."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        golden = pool.submit(lambda: read_table(read_lines(paths["golden.jsonl"]), golden_schema, GOLDEN_FREE_FORM))
        captures = pool.submit(lambda: read_table(read_lines(paths["captures.jsonl"]), capture_schema))
        golden.result(), captures.result()
    return time.perf_counter() - t0


def pytrec_to_means(paths: dict[str, Path]) -> tuple[float, dict[str, dict[str, float]], dict[str, float]]:
    import pytrec_eval

    t0 = time.perf_counter()
    with open(paths["qrels.txt"]) as f:
        qrels = pytrec_eval.parse_qrel(f)
    with open(paths["run.txt"]) as f:
        run = pytrec_eval.parse_run(f)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(REFERENCE.values())).evaluate(run)
    means = {m: math.fsum(q[m] for q in per_query.values()) / len(per_query) for m in REFERENCE.values()}
    return time.perf_counter() - t0, per_query, means


def agreement(scores: pa.Table, per_query: dict[str, dict[str, float]]) -> dict[str, tuple[float, int, int]]:
    """Per metric: (largest per-case |raglake − pytrec_eval|, cases compared, cases only one side scored)."""
    d = scores.to_pydict()
    ours: dict[str, dict[str, float]] = {m: {} for m in REFERENCE}
    for cid, metric, value, status in zip(d["case_id"], d["metric"], d["value"], d["status"]):
        if metric in ours and status == "ok":
            ours[metric][cid] = value
    out = {}
    for metric, measure in REFERENCE.items():
        theirs = {q: v[measure] for q, v in per_query.items()}
        both = ours[metric].keys() & theirs.keys()
        diff = max((abs(ours[metric][c] - theirs[c]) for c in both), default=math.nan)
        out[metric] = (diff, len(both), len(ours[metric].keys() ^ theirs.keys()))
    return out


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "load: " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=20240612)
    ap.add_argument("--keep", type=Path, help="write the data and the staged Parquet here (default: a temp folder)")
    ap.add_argument(
        "--repeat", type=int, default=3, help="timed runs of each, alternated; the best of each is compared"
    )
    ap.add_argument("--threads", type=int, default=0, help="pyarrow's CPU threads (default: its own, one per core)")
    args = ap.parse_args(argv)
    if args.threads:
        pa.set_cpu_count(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        (root / "warm").mkdir(parents=True, exist_ok=True)
        (root / "staged").mkdir(exist_ok=True)
        t0 = time.perf_counter()
        paths = write_replay(root, args.cases, args.seed)
        gen_s = time.perf_counter() - t0
        warm = write_replay(root / "warm", 200, args.seed + 1)
        raglake_to_parquet(warm, root / "warm")
        pytrec_to_means(warm)
        load_before = uptime()
        trec_times, ours_times, stages, parse_times = [], [], [], []
        for _ in range(args.repeat):  # alternated, so that both see the same load
            gc.collect()
            trec_s, per_query, means = pytrec_to_means(paths)
            gc.collect()
            ours_s, tables, split = raglake_to_parquet(paths, root / "staged")
            gc.collect()
            parse_times.append(json_parse_floor(paths))
            trec_times.append(trec_s)
            ours_times.append(ours_s)
            stages.append(split)
        load_after = uptime()
        trec_s, ours_s = min(trec_times), min(ours_times)
        best = stages[ours_times.index(ours_s)]
        agree = agreement(tables["scores"], per_query)
        sizes = {p.name: p.stat().st_size for p in paths.values()}
        report(args, gen_s, trec_s, ours_s, tables, agree, means, sizes, (load_before, load_after))
        print(f"runs (s): raglake {', '.join(f'{t:.2f}' for t in ours_times)}; "
              f"pytrec_eval {', '.join(f'{t:.2f}' for t in trec_times)}")  # fmt: skip
        print(f"raglake's best run by stage (s): {', '.join(f'{k} {v:.2f}' for k, v in best.items())}")
        parse_s = min(parse_times)
        print(
            f"the JSON parse floor: pyarrow's reader alone on the two files {parse_s:.2f} s"
            f" ({parse_s / trec_s:.2f}x pytrec_eval's whole run); raglake's own work beyond it"
            f" {ours_s - parse_s:.2f} s ({trec_s / (ours_s - parse_s):.2f}x pytrec_eval's throughput"
            " even with a parse that cost nothing)"
        )
    return 0 if all(d <= 1e-9 for d, _, _ in agree.values()) else 1


def report(args, gen_s, trec_s, ours_s, tables, agree, means, sizes, loads) -> None:
    n, w = args.cases, 84
    print("=" * w)
    print(f"raglake scale benchmark (library path): {n:,} cases x 10 chunks, k={K}, seed {args.seed}")
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, pyarrow {pa.__version__} "
          f"with {pa.cpu_count()} threads; pytrec_eval single-threaded")  # fmt: skip
    mib = {k: f"{v / 2**20:.0f} MiB" for k, v in sizes.items()}
    print(f"data: golden {mib['golden.jsonl']}, captures {mib['captures.jsonl']}, qrels {mib['qrels.txt']}, "
          f"run {mib['run.txt']} (generated in {gen_s:.1f} s)")  # fmt: skip
    print("-" * w)
    rows = {k: t.num_rows for k, t in tables.items()}
    print(f"{'raglake files -> staged Parquet':<36}{ours_s:>8.2f} s {n / ours_s:>11,.0f} cases/s  "
          f"({', '.join(f'{v:,} {k}' for k, v in rows.items())})")  # fmt: skip
    print(f"{'pytrec_eval files -> means':<36}{trec_s:>8.2f} s {n / trec_s:>11,.0f} cases/s  (P_10, RR, nDCG@10)")
    print(f"{'throughput raglake / pytrec_eval':<36}{trec_s / ours_s:>8.2f} x  (goal >= 1.0)")
    print("-" * w)
    print(f"{'per case':<18}{'max |diff|':>12}{'compared':>10}{'one side':>10}{'trec mean':>12}")
    for metric, (diff, both, one) in agree.items():
        print(f"{metric:<18}{diff:>12.1e}{both:>10,}{one:>10,}{means[REFERENCE[metric]]:>12.6f}")
    print(f"agreement to 1e-9: {'OK' if all(d <= 1e-9 for d, _, _ in agree.values()) else 'MISMATCH'}")
    print(f"load before: {loads[0]}")
    print(f"load after:  {loads[1]}")
    print("=" * w)


if __name__ == "__main__":
    sys.exit(main())
