"""Benchmark the builtin reference RAG: chunking, embedding against the raw model, and query latency.

    python benchmarks/builtin.py [--notes N] [--queries Q] [--quick] [--seed S] [--block B] [--whole]
                                 [--threads T] [--profile N]

Defaults: 300 notes (about 2,400 chunks), 200 queries; --quick: 200 notes, 50 queries. The issue's
2,000 notes (`--notes 2000`, about 15,700 chunks) takes well over 10 minutes on a 2-core machine:
each chunk is encoded twice (raglake and raw) at roughly 20-45 chunks/second.

Generates N synthetic markdown notes (seeded; two vaults, a few subfolders, each note with front
matter, an H1 with an intro and 3-8 nested sections of templated prose, some sections longer than
the chunk budget so they split) in a temp folder, then measures, all in this one process:

- chunking: raglake's `chunk_note` over every note (preloaded), with the real embedder's
  `count_tokens` and `max_sequence`, as build_index calls it: docs/second and chunks produced;
- embedding: every chunk's embed_text through raglake's real path (a TextEncoder over an EMPTY
  EmbeddingCache in a temp folder: dedupe, cache lookup, encode, shard write, stack), and the raw
  model (sentence-transformers' `model.encode(texts, batch_size=64, normalize_embeddings=True)`) on the same texts. The
  model is warmed up once before either is timed; the texts go through both in blocks of B
  (default 256, 4 batches), alternating which path goes first, so load from other processes on a
  shared machine hits both alike; the ratio is reported overall, by order (raw first / raglake
  first: two repetitions), and per block (min/median/max: the noise). Every text is a cache miss,
  as in a cold build_index. The goal is raglake/raw >= 0.9 chunks/second. `--whole` adds one
  single call each over all texts (raw first);
- warm rebuild: `build_index` over the corpus with a new TextEncoder on the same cache folder (it
  must encode 0 texts), end to end (read, index_version hash, chunk, cache load, stack);
- query latency: a ReferenceRag (top_k=5, folder_mode off) over that index; Q questions (corpus
  sentences with words dropped), each encoded alone through the TextEncoder (and, alternately before
  or after, by the raw model) then `rag._search`, and separately the full `rag.query` (folder
  selection + retrieval + extractive answer, whose sentence vectors also go through the TextEncoder):
  p50/p95 ms.

Nothing here asserts on time. Torch runs with its default thread count (printed; `--threads`
sets it). On a machine shared with other CPU-bound processes (the load average is printed), a
2-thread torch pays badly for one-question encodes (OpenMP waits on a descheduled thread: p95 of
~0.5 s instead of ~20-30 ms); the paired raw figure beside each raglake one is the reference.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, pct

sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from builtin_corpus import generate, make_questions  # noqa: E402

from raglake.builtin.chunker import ChunkSettings, chunk_note  # noqa: E402
from raglake.builtin.index import build_index  # noqa: E402
from raglake.builtin.rag import RagSettings, ReferenceRag  # noqa: E402
from raglake.embed.cache import EmbeddingCache, TextEncoder  # noqa: E402
from raglake.embed.encoders import get_embedder  # noqa: E402

BATCH = 64
GOAL = 0.9
TOP_K = 5


# ---- helpers ---------------------------------------------------------------------------------


def timed(fn, *args, **kwargs):
    gc.collect()
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def wall_ms(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1000


def raw_encode(model, texts: list[str]) -> np.ndarray:
    return model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)


def raglake_encode(embedder, cache_dir: Path, texts: list[str]) -> tuple[np.ndarray, TextEncoder]:
    encoder = TextEncoder(embedder, EmbeddingCache(cache_dir, embedder.key))
    return encoder.encode(texts, caller="index"), encoder


def paired_blocks(embedder, model, texts: list[str], cache_dir: Path, block: int):
    """Both paths over the same texts, block by block, alternating which goes first (so load from
    other processes and thermal drift hit both alike). raglake's side is one TextEncoder over one
    cache, empty at the start; blocks are disjoint, so every text is a cache miss, as in a cold
    build_index. Returns ([(raw_first, n, raw_s, raglake_s)], encoder, max |vector difference|)."""
    encoder = TextEncoder(embedder, EmbeddingCache(cache_dir, embedder.key))
    rows, max_diff = [], 0.0
    for b, i in enumerate(range(0, len(texts), block)):
        part = texts[i : i + block]
        raw_first = b % 2 == 0
        if raw_first:
            raw, raw_s = timed(raw_encode, model, part)
            ours, ours_s = timed(encoder.encode, part, caller="index")
        else:
            ours, ours_s = timed(encoder.encode, part, caller="index")
            raw, raw_s = timed(raw_encode, model, part)
        max_diff = max(max_diff, float(np.max(np.abs(ours - raw))))
        rows.append((raw_first, len(part), raw_s, ours_s))
    return rows, encoder, max_diff


def profile_encode(embedder, cache_dir: Path, texts: list[str], top: int = 16) -> str:
    prof = cProfile.Profile()
    prof.enable()
    raglake_encode(embedder, cache_dir, texts)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


# ---- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=None, help="notes to generate (default 300; --quick: 200)")
    ap.add_argument("--queries", type=int, default=None, help="questions timed (default 200; --quick: 50)")
    ap.add_argument("--quick", action="store_true", help="a fast smoke run: 200 notes, 50 queries")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument(
        "--block", type=int, default=256, help="texts per paired raw/raglake embedding block (default 256 = 4 batches)"
    )
    ap.add_argument(
        "--whole",
        action="store_true",
        help="also time both over all texts in one call each (raw first): 2 more encodes of the corpus",
    )
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's own choice)")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also cProfile raglake's cold encode of N texts and print the top functions",
    )
    args = ap.parse_args(argv)
    n_notes = args.notes or (200 if args.quick else 300)
    n_queries = args.queries or (50 if args.quick else 200)
    t_start = time.perf_counter()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    embedder = get_embedder()
    embedder.model  # noqa: B018 - load before anything is timed
    model = embedder.sentence_transformer  # the raw baseline: sentence-transformers' own model
    settings = ChunkSettings()
    tmp = tempfile.TemporaryDirectory(prefix="raglake-bench-builtin-")
    root = Path(tmp.name)
    corpus = root / "corpus"

    # ---- corpus ----
    (notes, gen_s) = timed(generate, corpus, n_notes, args.seed)

    # ---- chunking ----
    tok_s = 0.0

    def count(texts):
        nonlocal tok_s
        t = time.perf_counter()
        out = embedder.count_tokens(texts)
        tok_s += time.perf_counter() - t
        return out

    count(["warm the tokenizer up"])
    tok_s = 0.0

    def chunk_all():
        chunks, skipped = [], []
        for rel, raw in notes:
            c, s = chunk_note(rel, raw, settings, count, embedder.max_sequence)
            chunks += c
            skipped += s
        return chunks, skipped

    (chunks, skipped), chunk_s = timed(chunk_all)
    texts = [c.embed_text for c in chunks]
    n_texts = len(texts)
    tokens = [c.n_tokens for c in chunks]
    n_split = sum(c.part > 0 for c in chunks)
    distinct = len(set(texts))

    # ---- embedding ----
    assert embedder.batch_size == BATCH, f"raglake's embedder batch size is {embedder.batch_size}, not {BATCH}"
    raw_encode(model, texts[:BATCH])  # warm-up: one batch, before anything is timed
    raglake_encode(embedder, root / "cache-warmup", texts[:8])
    cold_dir = root / "cache"
    blocks, enc1, diff1 = paired_blocks(embedder, model, texts, cold_dir, args.block)
    whole = None
    if args.whole:
        raw_all, raw_all_s = timed(raw_encode, model, texts)
        del raw_all
        (rl_all, enc_all), rl_all_s = timed(raglake_encode, embedder, root / "cache-whole", texts)
        del rl_all
        whole = (raw_all_s, rl_all_s, enc_all.stats.seconds_encoding)

    # ---- warm rebuild = the index the queries use ----
    warm_encoder = TextEncoder(embedder, EmbeddingCache(cold_dir, embedder.key))
    index, warm_s = timed(build_index, corpus, warm_encoder, settings)
    warm_encoded, warm_cached = warm_encoder.stats.encoded, warm_encoder.stats.cached
    same_chunks = [c.embed_text for c in index.chunks] == texts

    # ---- queries ----
    rag = ReferenceRag(index, warm_encoder, RagSettings(top_k=TOP_K, folder_mode="off"))
    qrng = random.Random(args.seed + 2)
    warmup_q = make_questions(qrng, index.chunks, 5)
    questions = make_questions(qrng, index.chunks, n_queries)
    for q, _ in warmup_q:
        vec = warm_encoder.encode([q], caller="question")[0]
        rag._search(vec, None)
        rag.query("warmup", vec, 0.0)

    raw_q_ms, enc_ms, search_ms, retr_ms, query_ms, answer_ms = [], [], [], [], [], []
    hits = note_hits = abstained = 0
    for n, (q, source) in enumerate(questions):
        if n % 2:  # the raw model on the same question, alternating which goes first
            raw_q_ms.append(wall_ms(raw_encode, model, [q]))
        t0 = time.perf_counter()
        vec = warm_encoder.encode([q], caller="question")[0]
        t1 = time.perf_counter()
        ids, _ = rag._search(vec, None)
        t2 = time.perf_counter()
        if not n % 2:
            raw_q_ms.append(wall_ms(raw_encode, model, [q]))
        enc_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
        retr_ms.append((t2 - t0) * 1000)
        hits += int(source in ids)
        note_hits += int(index.chunks[source].rel_path in {index.chunks[i].rel_path for i in ids})
    for q, _ in questions:
        vec = warm_encoder.encode([q], caller="question")[0]  # cached now: the same vector as above
        t0 = time.perf_counter()
        capture = rag.query("q", vec, 0.0)
        query_ms.append((time.perf_counter() - t0) * 1000)
        answer_ms.append(capture.latency_ms.generation)
        abstained += int(capture.abstained)

    profile_text = profile_encode(embedder, root / "cache-profile", texts[: args.profile]) if args.profile else ""
    total_s = time.perf_counter() - t_start
    load_end = os.getloadavg()

    # ---- print ----
    import sentence_transformers

    w = 80
    print("=" * w)
    print(
        f"raglake builtin RAG benchmark: {n_notes:,} notes, {n_queries} queries, seed {args.seed}"
        + (" (--quick)" if args.quick else "")
    )
    print(
        f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, torch "
        f"{torch.__version__} with {torch.get_num_threads()} threads, sentence-transformers "
        f"{sentence_transformers.__version__}"
    )
    print(
        f"embedder {embedder.name}, max_sequence {embedder.max_sequence}, batch {BATCH}; "
        f"chunker max_tokens {settings.max_tokens}, overlap {settings.overlap_tokens}"
    )
    print("-" * w)
    print("corpus")
    print(
        f"  notes {len(notes):,} in {len({r.rsplit('/', 1)[0] for r, _ in notes})} folders of 2 vaults; "
        f"generated in {gen_s:.1f} s"
    )
    print(
        f"  chunks {n_texts:,} ({n_texts / len(notes):.1f}/note; {n_split:,} are parts of split sections; "
        f"{len(skipped)} skipped; {distinct:,} distinct texts)"
    )
    print(f"  tokens/chunk min {min(tokens)}  mean {np.mean(tokens):.1f}  p95 {pct(tokens, 95):.0f}  max {max(tokens)}")
    print("-" * w)
    print("chunking (chunk_note with the embedder's count_tokens, notes preloaded)")
    print(
        f"  {chunk_s:8.2f} s  {len(notes) / chunk_s:10,.0f} docs/s  {n_texts / chunk_s:10,.0f} chunks/s"
        f"   (tokenizer {tok_s / chunk_s:.0%} of it)"
    )
    print("-" * w)
    raw_s = sum(r[2] for r in blocks)
    rl_s = sum(r[3] for r in blocks)
    model_s = enc1.stats.seconds_encoding
    ratio = raw_s / rl_s
    block_ratios = [r[2] / r[3] for r in blocks]
    print(
        f"embedding, cold: the same {n_texts:,} texts through both, in {len(blocks)} blocks of <= {args.block}, "
        "alternating which goes first; model warmed up on one batch first"
    )
    print(f"  {f'raw model.encode(batch_size={BATCH})':<37}{raw_s:8.2f} s  {n_texts / raw_s:8.1f} chunks/s")
    print(
        f"  {'raglake TextEncoder (empty cache)':<37}{rl_s:8.2f} s  {n_texts / rl_s:8.1f} chunks/s   "
        f"(encoded {enc1.stats.encoded:,})"
    )
    print(
        f"  {'  of which the model':<37}{model_s:8.2f} s;  the rest (hash, dedupe, cache get/put, stack) "
        f"{rl_s - model_s:.2f} s = {(rl_s - model_s) / rl_s:.1%}"
    )
    print(
        f"  {'ratio raglake/raw (chunks/s)':<37}{ratio:8.3f}   goal >= {GOAL}: {'met' if ratio >= GOAL else 'NOT met'}"
    )
    for label, first in (("raw first", True), ("raglake first", False)):
        sel = [r for r in blocks if r[0] == first]
        if sel:
            print(
                f"  {'  blocks with ' + label:<37}{sum(r[2] for r in sel) / sum(r[3] for r in sel):8.3f}   "
                f"({len(sel)} blocks, {sum(r[1] for r in sel):,} texts)"
            )
    print(
        f"  {'  per-block ratio min/median/max':<37}{min(block_ratios):.3f} / {pct(block_ratios, 50):.3f} / "
        f"{max(block_ratios):.3f}   (noise)"
    )
    print(f"  {'max |raglake - raw| over all vectors':<37}{diff1:8.1e}")
    if whole:
        w_raw, w_rl, w_model = whole
        print(
            f"  --whole: one call each, raw first:  raw {n_texts / w_raw:.1f} chunks/s, raglake {n_texts / w_rl:.1f} "
            f"chunks/s (model {w_model:.2f} of {w_rl:.2f} s), ratio {w_raw / w_rl:.3f}"
        )
    print("-" * w)
    print("warm rebuild (build_index end to end: new TextEncoder on the same cache folder)")
    print(
        f"  {warm_s:8.2f} s  encoded {warm_encoded} texts ({'OK' if warm_encoded == 0 else 'EXPECTED 0'}), "
        f"{warm_cached:,} from cache; same chunks as the cold pass: {'yes' if same_chunks else 'NO'}"
    )
    print(f"  {warm_s / (rl_s + chunk_s):8.3f} x the cold cost (raglake encode + chunking)")
    print("-" * w)
    print(
        f"queries ({n_queries}, top_k {TOP_K}, folder_mode off, {len(index.chunks):,} chunks; "
        "5 warm-up queries untimed)"
    )
    print(f"  {'':36}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for label, vals in (
        ("encode question: raw model.encode", raw_q_ms),
        ("encode question: TextEncoder", enc_ms),
        ("_search top-5", search_ms),
        ("TextEncoder encode + _search", retr_ms),
        ("rag.query (select+search+answer)", query_ms),
        ("  its answer stage (latency_ms)", answer_ms),
    ):
        print(f"  {label:<36}{pct(vals, 50):9.2f}{pct(vals, 95):9.2f}{max(vals):9.2f}")
    print(
        f"  source chunk in top-{TOP_K}: {hits / n_queries:.0%}, source note: {note_hits / n_queries:.0%} "
        f"(a sanity check on templated text); rag.query abstained on {abstained}/{n_queries}"
    )
    print("-" * w)
    print(
        f"total {total_s:.1f} s; load average {load_start:.2f} at the start, {load_end[0]:.2f} at the end "
        f"({load_end[2]:.2f} over 15 min) on {os.cpu_count()} CPUs: other processes' load skews absolute figures"
    )
    print("=" * w)
    if profile_text:
        print(f"cProfile of raglake's cold encode of {min(args.profile, n_texts):,} texts:")
        print(profile_text)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
