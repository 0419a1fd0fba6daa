"""Benchmark raglake's embedding metrics (METRICS.md §4, issue 4) against the raw encoder and the seed.

    python benchmarks/embedding.py [--cases 2000] [--chunks 5] [--seed S] [--repeat R]
                                   [--baseline-cases 100] [--profile] [--stsb] [--no-timing]
                                   [--memory | --memory-cases 20000]

Inputs "of the sample style", seeded: N golden cases and captures built from the sample golden set
(data/golden/sample.jsonl) and the sample corpus (data/corpus, cut into chunks by raglake's own
heading-aware chunker with the packaged tokenizer). A tenth of the questions are the sample's own
(verbatim or with a prefix/suffix, with their reference answers and gold supports: these repeat); the
rest are written from one "topic" chunk drawn uniformly (its headings, or one of its sentences turned
into a question) with a reference of 1-2 of its sentences, each question and reference distinct
where the corpus allows (a golden set asks a question once). Answers are 1-3 sentences (reference and
chunk sentences, now and then an unsupported one from another note, sometimes with a "[1]"
citation); about 3% abstain and 1% are empty. Each capture retrieves C chunks: the topic chunk (at
rank 1-5, or missed), siblings from the same note and popular chunks, so the same few hundred chunk
texts are retrieved for many questions, as in a real run.

Timing part (one process, same inputs, the packaged all-MiniLM-L6-v2 warmed up first, on CPU):
  (1) raw model: `embedder.model.encode(distinct, batch_size=64, normalize_embeddings=True)` of the
      run's distinct texts, as raglake.embed.texts.collect_texts lists them;
  (2) raglake's embedding-scoring stage for the six sentence-embedding metrics, as the evaluate flow
      runs it: collect_texts -> one TextEncoder.encode of every distinct text through an EMPTY cache
      -> score_batch over the cases in batches of 100; once with an in-memory cache and once with an
      on-disk cache in a fresh temporary folder;
  (3) the seed-003 way: for each case and each metric, that metric's inputs are encoded with the raw
      model (one `model.encode([...])` call per metric and case, all of the metric's inputs in that
      one call, which is kinder to the seed than one call per argument) and cosines are taken; timed
      on the first --baseline-cases cases and extrapolated linearly to all (the output says so);
  (4) a warm re-score: a new TextEncoder over the same on-disk cache; it must encode 0 texts.
  Ratios (2)/(1) (goal <= 1.15) and (3)/(2) (goal >= 3). BERTScore (its own token pass through the
  same transformer) is timed separately: score_batch with bert_score_f1 over all cases.
  With --repeat R, (1) and (2, in-memory) are run R times interleaved (order alternating) and the
  ratio uses the fastest of each. On a shared machine minutes apart the load differs, so (2)/(1) is
  also given on process CPU time and "same-load": (2) over the model call inside (2), which is call
  (1) verbatim (same texts, order, batch size) timed within the stage. --profile adds a cProfile of
  stage (2) with function-level shares.

--stsb: Spearman correlation of raglake's semantic_similarity (reference_answer = sentence1,
  answer = sentence2, via score_batch) with the human scores of ../shared/metaeval/stsb/stsb-en-dev.csv
  (no header: sentence1, sentence2, score 0-5), beside the published ~0.82 of all-MiniLM-L6-v2 on
  STS-B, and the Spearman of the raw cosine (answer_correctness_emb, no max(0, .)).

--memory (20,000 cases) or --memory-cases N: in a fresh child process (so earlier work does not
  count), N cases x C chunks scored with every embedding metric, BERTScore P/R/F1 included, the way the
  flow does it (one encode of the distinct texts through an on-disk cache, batches of 100, all score
  rows kept). The cases reuse the texts of --memory-pool base cases (heavy repetition keeps the run to
  minutes: BERTScore embeds each batch's distinct answers and references again, so each batch draws
  from 10 base cases); the number of distinct texts is printed. Reported: peak RSS (getrusage
  ru_maxrss) of an untraced child, and the tracemalloc peak (Python objects and numpy buffers, not
  torch's) of a second, traced child. Goal: under 3 GiB.

Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import cProfile
import csv
import gc
import io
import json
import math
import os
import platform
import pstats
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from raglake.embed.cache import EmbeddingCache, TextEncoder  # noqa: E402
from raglake.embed.model import get_embedder  # noqa: E402
from raglake.embed.texts import collect_texts  # noqa: E402
from raglake.metrics.context import ScoringConfig  # noqa: E402
from raglake.metrics.registry import get_metric  # noqa: E402
from raglake.schemas import Capture, GoldenCase  # noqa: E402
from raglake.scoring import ScoredBatch, score_batch  # noqa: E402
from raglake.text.sentences import split_sentences  # noqa: E402

SENTENCE_METRICS = ("context_relevance", "context_sufficiency", "answer_relevance_emb", "answer_correctness_emb",
                    "answer_hallucination", "semantic_similarity")
BERT_METRICS = ("bert_score_f1", "bert_score_precision", "bert_score_recall")
BATCH = 100  # the flow's default batch_size
GOAL_RAW = 1.15
GOAL_SEED = 3.0
GOAL_MEMORY_GIB = 3.0
STSB_REFERENCE = 0.82
GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
CORPUS = ROOT / "data" / "corpus"
STSB = ROOT.parent / "shared" / "metaeval" / "stsb" / "stsb-en-dev.csv"

ABSTAIN = ("I couldn't find that in your notes.", "I don't know; the notes don't say.",
           "There is nothing about this in the notes I can see.")
ANSWER_LEADS = ("", "", "", "According to the notes, ", "Yes: ", "From what I can see, ", "In short, ")
GOLDEN_VARIANTS = ("{q}", "{q}", "Quick question: {ql}", "{q} Please cite the note.", "From my notes: {ql}",
                   "{qs}, according to my notes?", "Can you check this for me: {ql}")
REFERENCE_LEADS = ("", "", "", "Yes. ", "The notes say: ", "Per {title}: ", "According to {title}, ")
TOPIC_TEMPLATES = ("What does my note on {leaf} ({title}) say?", "Is it true that {s}?",
                   "What was decided about {leaf} in {title}?", "Where do my notes mention that {s}?",
                   "Can you summarise {leaf} from {title}?", "Do my notes confirm that {s}?",
                   "What is the latest on {leaf}?", "Remind me: {s}?")


# ---- inputs ----------------------------------------------------------------------------------


class Chunk:
    __slots__ = ("rel_path", "heading", "text", "sentences")

    def __init__(self, rel_path: str, heading: tuple[str, ...], text: str):
        self.rel_path, self.heading, self.text = rel_path, heading, text
        leaf = heading[-1] if heading else ""
        self.sentences = [s for s in split_sentences(text) if 25 <= len(s) <= 240 and s != leaf
                          and not s.startswith("#")]


def load_chunks(embedder, n_distinct: int, rng: random.Random) -> tuple[list[Chunk], int]:
    """The sample corpus cut by raglake's chunker (the texts a builtin target retrieves)."""
    from raglake.builtin.chunker import ChunkSettings, chunk_note

    chunks: list[Chunk] = []
    for path in sorted(CORPUS.rglob("*.md")):
        found, _ = chunk_note(path.relative_to(CORPUS).as_posix(), path.read_text(encoding="utf-8"), ChunkSettings(),
                              embedder.count_tokens, embedder.max_sequence)
        chunks.extend(Chunk(c.rel_path, c.heading_path, c.text) for c in found)
    available = len(chunks)
    chunks = [c for c in chunks if c.sentences]
    if len(chunks) > n_distinct:
        chunks = rng.sample(chunks, n_distinct)
    return chunks, available


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:2] != s[:2].upper() else s


def _as_clause(sentence: str) -> str:
    return _lower_first(sentence.rstrip(" .!?:;"))


def generate(n: int, n_chunks: int, chunks: list[Chunk], golden: list[dict], seed: int,
             id_prefix: str = "bench") -> tuple[list[dict], list[dict]]:
    """Raw golden-case and capture dicts (see the module docstring)."""
    rng = random.Random(seed)
    order = chunks[:]
    rng.shuffle(order)
    cum, total = [], 0.0
    for r in range(len(order)):  # a few chunks are retrieved for very many questions
        total += 1.0 / (r + 1) ** 0.7
        cum.append(total)
    by_note: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_note.setdefault(c.rel_path, []).append(c)
    by_anchor = {(c.rel_path, " > ".join(c.heading)): c for c in chunks}

    def popular() -> Chunk:
        return rng.choices(order, cum_weights=cum)[0]

    cases, captures = [], []
    seen_questions: set[str] = set()
    seen_references: set[str | None] = set()
    for i in range(n):
        cid = f"{id_prefix}-{i:06d}"
        case: dict = {"id": cid}
        if rng.random() < 0.1:  # one of the sample's questions (re-asked, with its reference)
            g = rng.choice(golden)
            q = g["question"]
            case["question"] = rng.choice(GOLDEN_VARIANTS).format(q=q, ql=_lower_first(q), qs=q.rstrip("?"))
            case["reference_answer"] = g.get("reference_answer")
            case["answerable"] = g.get("answerable", True)
            case["gold_supports"] = g.get("gold_supports", [])
            sup = case["gold_supports"][0] if case["gold_supports"] else None
            topic = by_anchor.get((sup["rel_path"], sup["heading_path"])) if sup else None
            topic = topic or popular()
            ref_sentences = split_sentences(case["reference_answer"] or "") or topic.sentences[:1]
        else:  # written from a topic chunk (any chunk: questions cover the corpus, hubs are retrieved)
            for _ in range(12):  # a golden set asks each question once: retry a duplicate
                topic = rng.choice(chunks)
                s = rng.choice(topic.sentences)
                title, leaf = (topic.heading[0], topic.heading[-1]) if topic.heading else ("my notes", "this")
                question = rng.choice(TOPIC_TEMPLATES).format(leaf=leaf, title=title, s=_as_clause(s))
                if question not in seen_questions:
                    break
            case["question"] = question
            for _ in range(12):
                start = rng.randrange(len(topic.sentences))
                ref_sentences = topic.sentences[start : start + rng.choice((1, 1, 2))]
                lead = rng.choice(REFERENCE_LEADS).format(title=title)
                body = " ".join(ref_sentences)
                reference = lead + (_lower_first(body) if lead.endswith(", ") else body)
                if reference not in seen_references:
                    break
            case["reference_answer"] = reference
            case["gold_supports"] = [{"rel_path": topic.rel_path, "heading_path": " > ".join(topic.heading),
                                      "required": True}]
        seen_questions.add(case["question"])
        seen_references.add(case["reference_answer"])

        capture: dict = {"case_id": cid, "method": "bench", "status": "ok"}
        roll = rng.random()
        if roll < 0.03:
            capture["answer"], capture["abstained"] = rng.choice(ABSTAIN), True
        elif roll < 0.04:
            capture["answer"] = ""
        else:
            n_sent = rng.choices((1, 2, 3), weights=(0.45, 0.35, 0.2))[0]
            first = rng.choice(ref_sentences)
            parts = [rng.choice(ANSWER_LEADS) + (_lower_first(first) if rng.random() < 0.5 else first)]
            while len(parts) < n_sent:
                source = popular() if rng.random() < 0.15 else topic  # now and then an unsupported sentence
                parts.append(rng.choice(source.sentences))
            if rng.random() < 0.3:
                parts[-1] = parts[-1] + " [1]"
            capture["answer"], capture["abstained"] = " ".join(parts), False

        picked: list[Chunk] = []
        if rng.random() < 0.85:
            picked.append(topic)
        siblings = [c for c in by_note.get(topic.rel_path, []) if c is not topic]
        while len(picked) < n_chunks:
            c = rng.choice(siblings) if siblings and rng.random() < 0.4 else popular()
            if all(c is not p for p in picked):
                picked.append(c)
        if picked and picked[0] is topic:  # the topic chunk at rank 1-5
            picked.insert(min(rng.choice((0, 0, 0, 1, 1, 2, 3, 4)), n_chunks - 1), picked.pop(0))
        scores = sorted((rng.uniform(0.3, 0.9) for _ in picked), reverse=True)
        capture["retrieved"] = [{"rank": r + 1, "rel_path": c.rel_path, "heading_path": " > ".join(c.heading),
                                 "text": c.text, "score": round(s, 4)} for r, (c, s) in enumerate(zip(picked, scores))]
        cases.append(case)
        captures.append(capture)
    return cases, captures


def build_pairs(cases: list[dict], captures: list[dict], via_json: bool = False) -> list[tuple[GoldenCase, Capture]]:
    if via_json:  # each string its own object, as when captures are read back from JSON lines
        return [(GoldenCase.model_validate_json(json.dumps(c)), Capture.model_validate_json(json.dumps(x)))
                for c, x in zip(cases, captures)]
    return [(GoldenCase.model_validate(c), Capture.model_validate(x)) for c, x in zip(cases, captures)]


def load_inputs(embedder, n: int, n_chunks: int, seed: int, distinct_chunks: int):
    rng = random.Random(seed)
    golden = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    chunks, available = load_chunks(embedder, distinct_chunks, rng)
    cases, captures = generate(n, n_chunks, chunks, golden, seed)
    return cases, captures, golden, chunks, available


# ---- the three ways ----------------------------------------------------------------------------


def raw_encode(embedder, texts: Sequence[str]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one raw encode of the texts."""
    t0, c0 = time.perf_counter(), time.process_time()
    embedder.model.encode(list(texts), batch_size=64, normalize_embeddings=True)
    return time.perf_counter() - t0, time.process_time() - c0


class StageResult:
    def __init__(self) -> None:
        self.collect = self.encode = self.model = self.score = self.cpu = 0.0
        self.requested = self.distinct = self.encoded = 0
        self.scored = ScoredBatch()

    @property
    def total(self) -> float:
        return self.collect + self.encode + self.score


def raglake_stage(pairs, embedder, metrics, config: ScoringConfig, cache_root: str | None) -> StageResult:
    """What the evaluate flow does after capture: embed_texts (collect + one encode), then score batches."""
    out = StageResult()
    c0 = time.process_time()
    t0 = time.perf_counter()
    texts = collect_texts(pairs, config.k)
    t1 = time.perf_counter()
    encoder = TextEncoder(embedder, EmbeddingCache(cache_root, embedder.key))
    encoder.encode(texts, caller="metrics")
    t2 = time.perf_counter()
    encoded_before_scoring = encoder.stats.encoded
    for start in range(0, len(pairs), BATCH):
        out.scored.extend(score_batch(pairs[start : start + BATCH], metrics, config, encoder=encoder))
    t3 = time.perf_counter()
    out.cpu = time.process_time() - c0
    out.collect, out.encode, out.score = t1 - t0, t2 - t1, t3 - t2
    out.model = encoder.stats.seconds_encoding
    out.requested, out.distinct = len(texts), len(texts)
    out.encoded = encoder.stats.encoded
    if encoder.stats.encoded != encoded_before_scoring:
        print(f"WARNING: the scoring batches encoded {encoder.stats.encoded - encoded_before_scoring} more text(s)")
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:  # seed 003
    denom = (np.linalg.norm(a) * np.linalg.norm(b)) + 1e-10
    return float(np.dot(a, b) / denom)


def seed_scores(pairs, model, k: int, theta_s: float = 0.5, theta_h: float = 0.4) -> dict[str, dict[str, float]]:
    """Seed 003's straightforward way: every metric encodes its own inputs (one encode call per metric
    and case), on the cases and with the undefined rules raglake uses, so both do the same metrics."""
    from raglake.metrics.rules import abstained as rule_abstained

    def enc(texts: list[str]) -> np.ndarray:
        return model.encode(texts, convert_to_numpy=True, show_progress_bar=False)

    out: dict[str, dict[str, float]] = {m: {} for m in SENTENCE_METRICS}
    for case, cap in pairs:
        if cap.failed:
            continue
        q, a, ref = case.question, cap.answer, case.reference_answer or ""
        contexts = [c.text for c in cap.top_k(k) if c.text.strip()]
        has_answer, abst = bool(a.strip()), rule_abstained(cap)[0]
        if contexts:
            v = enc([q, *contexts])  # context_relevance
            out["context_relevance"][case.id] = float(np.mean([_cosine(v[0], c) for c in v[1:]]))
            v = enc([q, *contexts])  # context_sufficiency
            out["context_sufficiency"][case.id] = sum(_cosine(v[0], c) >= theta_s for c in v[1:]) / k
        if has_answer and not abst:
            v = enc([q, a])  # answer_relevance
            out["answer_relevance_emb"][case.id] = _cosine(v[0], v[1])
        if has_answer and ref.strip():
            v = enc([a, ref])  # answer_correctness
            out["answer_correctness_emb"][case.id] = _cosine(v[0], v[1])
            v = enc([a, ref])  # semantic_similarity
            out["semantic_similarity"][case.id] = max(0.0, _cosine(v[0], v[1]))
        if has_answer and not abst and contexts:
            sentences = split_sentences(a)
            v = enc([*sentences, *contexts])  # answer_hallucination
            s, c = v[: len(sentences)], v[len(sentences) :]
            best = [max(_cosine(x, y) for y in c) for x in s]
            out["answer_hallucination"][case.id] = float(np.mean([b < theta_h for b in best]))
    return out


def per_case(scores: dict[str, list]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for cid, name, value, status in zip(scores["case_id"], scores["metric"], scores["value"], scores["status"]):
        if status == "ok":
            out.setdefault(name, {})[cid] = value
    return out


# ---- profile -------------------------------------------------------------------------------------


def profile_stage(pairs, embedder, metrics, config, top: int = 22) -> str:
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    raglake_stage(pairs, embedder, metrics, config, None)
    wall = time.perf_counter() - t0
    prof.disable()
    st = pstats.Stats(prof)
    total = sum(v[2] for v in st.stats.values())  # all own time = the profiled total

    def name(key) -> str:
        file, line, func = key
        if file == "~":
            return func
        parts = Path(file).parts
        for anchor in ("raglake", "sentence_transformers", "transformers", "torch", "numpy", "tokenizers"):
            if anchor in parts:
                return "/".join(parts[parts.index(anchor):]) + f":{line}({func})"
        return f"{Path(file).name}:{line}({func})"

    rows = sorted(st.stats.items(), key=lambda kv: kv[1][3], reverse=True)
    out = io.StringIO()
    out.write(f"profiled stage: {wall:.2f} s wall under cProfile ({total:.2f} s of own time counted)\n")
    model = sum(v[3] for k, v in st.stats.items() if k[0].endswith(os.path.join("raglake", "embed", "model.py"))
                and k[2] == "encode")
    out.write(f"inside Embedder.encode (the model call): {model:.2f} s = {100 * model / total:.1f}%; "
              f"everything else raglake does: {total - model:.2f} s = {100 * (total - model) / total:.1f}%\n")
    out.write("by cumulative time (share of the profiled stage):\n")
    shown = 0
    for key, (cc, nc, tt, ct, _) in rows:
        if "raglake" not in key[0] and "sentence_transformers" not in key[0] and key[2] not in ("score_batch",):
            continue
        out.write(f"  {ct:8.2f} s {100 * ct / total:6.1f}%  own {tt:7.2f} s  calls {nc:>9,}  {name(key)}\n")
        shown += 1
        if shown >= top:
            break
    out.write("by own time (share of the profiled stage):\n")
    for key, (cc, nc, tt, ct, _) in sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]:
        out.write(f"  {tt:8.2f} s {100 * tt / total:6.1f}%  calls {nc:>9,}  {name(key)}\n")
    return out.getvalue()


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
    pairs = [(GoldenCase(id=f"stsb-{i:05d}", question=s1, reference_answer=s1),
              Capture(case_id=f"stsb-{i:05d}", answer=s2, abstained=False)) for i, (s1, s2, _) in enumerate(rows)]
    human = {f"stsb-{i:05d}": float(r[2]) for i, r in enumerate(rows)}
    metrics = [get_metric("semantic_similarity"), get_metric("answer_correctness_emb")]
    t0 = time.perf_counter()
    encoder = TextEncoder(embedder, EmbeddingCache(None, embedder.key))
    scored = ScoredBatch()
    for start in range(0, len(pairs), BATCH):
        scored.extend(score_batch(pairs[start : start + BATCH], metrics, ScoringConfig(), encoder=encoder))
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
    v1 = embedder.model.encode([p[0].reference_answer for p in check], batch_size=64, normalize_embeddings=True)
    v2 = embedder.model.encode([p[1].answer for p in check], batch_size=64, normalize_embeddings=True)
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


def max_rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def memory_child(args) -> int:
    """One memory pass in this (fresh) process; prints 'key=value' lines the parent reports."""
    traced = args.memory_child == "traced"
    embedder = get_embedder()
    embedder.model.encode(["warm up"] * 8)
    rss_model, rss_model_now = max_rss_mib(), rss_now_mib()
    rng = random.Random(args.seed + 7)
    golden = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
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
        texts = collect_texts(pairs, config.k)
        encoder = TextEncoder(embedder, EmbeddingCache(tmp, embedder.key))
        encoder.encode(texts, caller="metrics")
        t2 = time.perf_counter()
        rss_encoded = rss_now_mib()
        scored = ScoredBatch()
        for start in range(0, len(pairs), BATCH):
            scored.extend(score_batch(pairs[start : start + BATCH], metrics, config, encoder=encoder))
        t3 = time.perf_counter()
        rss_scored = rss_now_mib()
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if traced else float("nan")
    if traced:
        tracemalloc.stop()
    ok = sum(s == "ok" for s in scored.scores["status"])
    print(f"mode={args.memory_child}")
    print(f"cases={len(pairs)}")
    print(f"distinct_texts={len(texts)}")
    print(f"distinct_answer_ref={len({t for c, x in pairs for t in (c.reference_answer, x.answer) if t})}")
    print(f"encoded={encoder.stats.encoded}")
    print(f"score_rows={len(scored.scores['case_id'])}")
    print(f"ok_rows={ok}")
    print(f"chunk_rows={len(scored.chunks['case_id'])}")
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
        cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-child", mode, "--memory-cases",
               str(args.memory_cases), "--memory-pool", str(args.memory_pool), "--chunks", str(args.chunks),
               "--seed", str(args.seed), "--distinct-chunks", str(args.distinct_chunks)]
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


# ---- report ----------------------------------------------------------------------------------------


def fmt_row(label: str, seconds: float, extra: str = "") -> str:
    return f"{label:<50}{seconds:>9.2f} s  {extra}"


def run_timing(args, embedder, out: list[str]) -> None:
    t0 = time.perf_counter()
    cases, captures, golden, chunks, available = load_inputs(embedder, args.cases, args.chunks, args.seed,
                                                              args.distinct_chunks)
    pairs = build_pairs(cases, captures)
    gen_s = time.perf_counter() - t0
    config = ScoringConfig(k=args.chunks)
    metrics = [get_metric(m) for m in SENTENCE_METRICS]
    n = len(pairs)

    # warm-up: the model, torch's kernels, the scoring path (imports), BERTScore's scorer
    embedder.model.encode([c.text for c in chunks[:64]], batch_size=64, normalize_embeddings=True)
    raglake_stage(pairs[:20], embedder, metrics, config, None)
    score_batch(pairs[:8], [get_metric("bert_score_f1")], config,
                encoder=TextEncoder(embedder, EmbeddingCache(None, embedder.key)))

    distinct = collect_texts(pairs, config.k)
    kinds = {
        "questions": {c.question for c, _ in pairs},
        "answers": {x.answer for _, x in pairs if x.answer.strip()},
        "references": {c.reference_answer for c, _ in pairs if c.reference_answer},
        "chunks": {ch.text for _, x in pairs for ch in x.top_k(config.k)},
    }
    chunk_slots = sum(len(x.top_k(config.k)) for _, x in pairs)
    requested = sum(1 + (2 if x.answer.strip() else 0) + len(x.top_k(config.k)) for _, x in pairs)

    raw_times, mem_runs = [], []
    for rep in range(args.repeat):  # interleaved, the order alternating, so drift in load hits both
        for which in ((0, 1) if rep % 2 == 0 else (1, 0)):
            gc.collect()
            if which == 0:
                raw_times.append(raw_encode(embedder, distinct))
            else:
                mem_runs.append(raglake_stage(pairs, embedder, metrics, config, None))
    raw_s, raw_cpu = min(raw_times)
    mem = min(mem_runs, key=lambda r: r.total)
    with tempfile.TemporaryDirectory(prefix="raglake-embcache-") as tmp:
        gc.collect()
        disk = raglake_stage(pairs, embedder, metrics, config, tmp)
        shards = list(Path(tmp).rglob("shard-*.npz"))
        shard_mib = sum(p.stat().st_size for p in shards) / 2**20
        gc.collect()
        warm = raglake_stage(pairs, embedder, metrics, config, tmp)  # a new TextEncoder and cache object

    # agreement of the two raglake runs (same vectors) and values for the seed comparison
    ours = per_case(mem.scored.scores)
    disk_vals = per_case(disk.scored.scores)
    same_disk = all(ours.get(m, {}) == disk_vals.get(m, {}) for m in SENTENCE_METRICS)

    # BERTScore, its own token pass
    gc.collect()
    bert_encoder = TextEncoder(embedder, EmbeddingCache(None, embedder.key))
    bert_texts = 0
    t0 = time.perf_counter()
    bert_scored = ScoredBatch()
    for start in range(0, n, BATCH):
        part = pairs[start : start + BATCH]
        bert_texts += len({t for c, x in part
                           if x.answer.strip() and (c.reference_answer or "").strip() and not x.failed
                           for t in (x.answer, c.reference_answer)})
        bert_scored.extend(score_batch(part, [get_metric("bert_score_f1")], config, encoder=bert_encoder))
    bert_s = time.perf_counter() - t0
    bert_ok = [v for v, s in zip(bert_scored.scores["value"], bert_scored.scores["status"]) if s == "ok"]

    # the seed's way, on a prefix of the cases
    m = n if args.baseline_cases <= 0 else min(n, args.baseline_cases)
    gc.collect()
    t0 = time.perf_counter()
    seed_vals = seed_scores(pairs[:m], embedder.model, config.k)
    seed_sub_s = time.perf_counter() - t0
    seed_s = seed_sub_s * n / m
    seed_requested = sum(_seed_texts(c, x, config.k) for c, x in pairs[:m])
    seed_requested_all = sum(_seed_texts(c, x, config.k) for c, x in pairs)

    profile_text = profile_stage(pairs, embedder, metrics, config) if args.profile else ""

    # ---- print ----
    w = 100
    out.append("=" * w)
    out.append(f"raglake embedding benchmark: {n:,} cases x {args.chunks} chunks (k={config.k}), seed {args.seed}; "
               f"embedder {embedder.key}")
    out.append(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, torch threads "
               f"{_torch_threads()}, load average {os.getloadavg()[0]:.2f} at the end (shared machine)")
    out.append(f"inputs built in {gen_s:.1f} s from {len(golden)} sample golden cases and {available} corpus chunks "
               f"({len(chunks)} with sentences used)")
    out.append(f"  distinct texts raglake needs: {len(distinct):,} (of {requested:,} text slots: "
               f"{len(kinds['questions']):,} questions, {len(kinds['answers']):,} answers, "
               f"{len(kinds['references']):,} references, {len(kinds['chunks']):,} chunks for {chunk_slots:,} "
               f"retrieved slots, plus answer sentences)")
    out.append("-" * w)
    rep = f" (fastest of {args.repeat}: {', '.join(f'{t:.2f}' for t, _ in raw_times)})" if args.repeat > 1 else ""
    out.append(fmt_row("(1) raw model.encode of the distinct texts once", raw_s,
                       f"{len(distinct) / raw_s:,.0f} texts/s, cpu {raw_cpu:.2f} s{rep}"))
    rep = (f" (fastest of {args.repeat}: {', '.join(f'{r.total:.2f}' for r in mem_runs)})" if args.repeat > 1 else "")
    out.append(fmt_row("(2) raglake stage, in-memory cache", mem.total,
                       f"{n / mem.total:,.0f} cases/s, cpu {mem.cpu:.2f} s{rep}"))
    out.append(_split(mem))
    out.append(fmt_row("(2') raglake stage, on-disk cache (fresh temp dir)", disk.total,
                       f"{n / disk.total:,.0f} cases/s; {len(shards)} shard(s), {shard_mib:.1f} MiB"))
    out.append(_split(disk))
    out.append(fmt_row(f"(3) seed-003 per-metric encoding, {m:,} cases", seed_sub_s,
                       f"{seed_requested:,} texts encoded in {6 * m:,}-ish calls"))
    if m < n:
        out.append(fmt_row(f"    extrapolated linearly to {n:,} cases", seed_s,
                           f"(EXTRAPOLATED x{n / m:.1f}; the full set asks {seed_requested_all:,} encodings, "
                           f"{seed_requested_all / max(seed_requested, 1) * m / n:.2f}x the prefix's per-case rate)"))
    out.append(fmt_row("(4) warm re-score: same disk cache, new TextEncoder", warm.total,
                       f"texts encoded: {warm.encoded} (must be 0: {'OK' if warm.encoded == 0 else 'FAILED'})"))
    out.append(_split(warm))
    out.append("-" * w)
    r1 = mem.total / raw_s
    r1d = disk.total / raw_s
    r3 = seed_s / mem.total
    out.append(f"{'ratio (2)/(1) raglake / raw encode, in-memory':<50}{r1:>9.3f}    goal <= {GOAL_RAW:.2f}: "
               f"{'met' if r1 <= GOAL_RAW else 'NOT met'}")
    out.append(f"{'ratio (2)/(1) raglake / raw encode, on-disk':<50}{r1d:>9.3f}    goal <= {GOAL_RAW:.2f}: "
               f"{'met' if r1d <= GOAL_RAW else 'NOT met'}")
    out.append(f"{'ratio (3)/(2) seed / raglake (in-memory)':<50}{r3:>9.2f}    goal >= {GOAL_SEED:.0f}: "
               f"{'met' if r3 >= GOAL_SEED else 'NOT met'}"
               + ("   (3) extrapolated" if m < n else ""))
    out.append(f"{'ratio (2)/(1) on process CPU time, in-memory':<50}{mem.cpu / raw_cpu:>9.3f}")
    same = mem.total / mem.model if mem.model else float("nan")
    out.append(f"{'ratio (2)/(1) same-load: (2) / its model call':<50}{same:>9.3f}    goal <= {GOAL_RAW:.2f}: "
               f"{'met' if same <= GOAL_RAW else 'NOT met'}   (the model call inside (2) is call (1) verbatim:")
    out.append(f"{'':<64}same texts, order, batch size; timed within the stage, so under the same load)")
    out.append(f"{'raglake time beyond the model (2) - model':<50}{mem.total - mem.model:>9.2f} s  "
               f"({100 * (mem.total - mem.model) / mem.total:.1f}% of (2); model inside (2): {mem.model:.2f} s = "
               f"{mem.model / raw_s:.3f} x (1): the difference between (1) and (2)'s model call is machine load)")
    out.append("-" * w)
    out.append(fmt_row("BERTScore: bert_score_f1 over all cases", bert_s,
                       f"{bert_texts:,} texts embedded (distinct per batch of {BATCH}), {bert_texts / bert_s:,.0f} "
                       f"texts/s, {n / bert_s:,.0f} cases/s; mean F1 {np.mean(bert_ok):.4f} over {len(bert_ok):,}"))
    out.append("-" * w)
    out.append(f"{'metric':<24}{'n ok':>7}{'mean raglake':>14}{'raglake*':>10}{'seed*':>10}{'max |diff|*':>13}   "
               f"* on the first {m:,} cases; disk == memory: {'yes' if same_disk else 'NO'}")
    prefix_ids = {c.id for c, _ in pairs[:m]}
    for name in SENTENCE_METRICS:
        vals = ours.get(name, {})
        sv = seed_vals.get(name, {})
        common = [c for c in sv if c in vals]
        diff = max((abs(vals[c] - sv[c]) for c in common), default=float("nan"))
        sub = [v for c, v in vals.items() if c in prefix_ids]
        missing = len(set(sv) ^ {c for c in vals if c in prefix_ids})
        seed_mean = math.fsum(sv.values()) / len(sv) if sv else float("nan")
        out.append(f"{name:<24}{len(vals):>7,}{math.fsum(vals.values()) / max(len(vals), 1):>14.4f}"
                   f"{math.fsum(sub) / max(len(sub), 1):>10.4f}{seed_mean:>10.4f}{diff:>13.1e}"
                   + (f"   {missing} case(s) defined in one only" if missing else ""))
    out.append("=" * w)
    if profile_text:
        out.append("cProfile of stage (2), in-memory cache (profiling inflates Python-level time):")
        out.append(profile_text)


def _seed_texts(case: GoldenCase, cap: Capture, k: int) -> int:
    from raglake.metrics.rules import abstained as rule_abstained

    if cap.failed:
        return 0
    ctx = len([c for c in cap.top_k(k) if c.text.strip()])
    has_answer, abst = bool(cap.answer.strip()), rule_abstained(cap)[0]
    ref = bool((case.reference_answer or "").strip())
    n = 2 * (1 + ctx) if ctx else 0
    n += 2 if has_answer and not abst else 0
    n += 4 if has_answer and ref else 0
    n += len(split_sentences(cap.answer)) + ctx if has_answer and not abst and ctx else 0
    return n


def _split(r: StageResult) -> str:
    return (f"{'':<8}collect_texts {r.collect:.2f} s | encode {r.encode:.2f} s (model {r.model:.2f} s, "
            f"{r.encoded:,} texts encoded) | score_batch x{math.ceil(len(set(r.scored.scores['case_id'])) / BATCH)} "
            f"{r.score:.2f} s")


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--chunks", type=int, default=5, help="retrieved chunks per capture (and k); default 5")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--distinct-chunks", type=int, default=350, help="distinct chunk texts shared by the cases")
    ap.add_argument("--baseline-cases", type=int, default=100,
                    help="cases the seed-003 way is timed on, then extrapolated (0: all)")
    ap.add_argument("--repeat", type=int, default=1, help="run (1) and (2) this many times, interleaved; fastest used")
    ap.add_argument("--profile", action="store_true", help="cProfile raglake's stage (2) and print function shares")
    ap.add_argument("--stsb", action="store_true", help="Spearman of semantic_similarity on STS-B dev")
    ap.add_argument("--no-timing", action="store_true", help="skip the timing part (e.g. with --stsb or --memory)")
    ap.add_argument("--memory", action="store_true", help="the memory check with 20,000 cases")
    ap.add_argument("--memory-cases", type=int, default=0,
                    help="the memory check with N cases (0: off unless --memory)")
    ap.add_argument("--memory-pool", type=int, default=1000, help="distinct base cases the memory cases repeat")
    ap.add_argument("--memory-child", choices=("untraced", "traced"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory and not args.memory_cases:
        args.memory_cases = 20_000
    if args.memory_child:
        return memory_child(args)

    embedder = get_embedder()
    t0 = time.perf_counter()
    embedder.model  # noqa: B018 - load once, outside every timing
    load_s = time.perf_counter() - t0
    out: list[str] = [f"model loaded in {load_s:.1f} s: {embedder.key} ({embedder.path})"]
    if not args.no_timing:
        run_timing(args, embedder, out)
        print("\n".join(out), flush=True)
        out = []
    if args.stsb:
        out += run_stsb(embedder)
        out.append("=" * 100)
        print("\n".join(out), flush=True)
        out = []
    if args.memory_cases:
        out += run_memory(args)
        out.append("=" * 100)
    if out:
        print("\n".join(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
