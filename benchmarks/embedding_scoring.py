"""The ways benchmarks/embedding.py scores the embedding metrics: the raw model's one encode, raglake's
embedding-scoring stage (as the evaluate flow runs it), seed 003's per-metric encoding, and a cProfile
of raglake's stage."""

from __future__ import annotations

import cProfile
import gc
import io
import math
import os
import pstats
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from _common import cpu_seconds

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.cache import EmbeddingCache, TextEncoder, text_key
from raglake.embed.texts import collect_texts
from raglake.metrics.context import ScoringConfig
from raglake.pipeline.scoring import ScoredBatch, score_columnar
from raglake.schemas import Capture, GoldenCase
from raglake.text import sentences, words
from raglake.text.sentences import split_sentences

SENTENCE_METRICS = (
    "context_relevance",
    "context_sufficiency",
    "answer_relevance_emb",
    "answer_correctness_emb",
    "answer_hallucination",
    "semantic_similarity",
)
BERT_METRICS = ("bert_score_f1", "bert_score_precision", "bert_score_recall")
BATCH = 100  # the flow's default batch_size


# ---- the three ways ----------------------------------------------------------------------------


def score_pairs(pairs: Sequence, metrics, config: ScoringConfig, *, size: int = BATCH, **kw) -> ScoredBatch:
    """raglake's scoring of the pairs as the score task runs it: score_columnar over each batch of `size`
    cases (keyword arguments passed on), its columns made here from the models (the task reads them from
    its staged files); the batches' tables concatenated."""
    parts = [
        score_columnar(ColumnarBatch.from_models(pairs[start : start + size]), metrics, config, **kw).tables()
        for start in range(0, len(pairs), size)
    ]
    if not parts:
        return ScoredBatch()
    return ScoredBatch(tables={name: pa.concat_tables([p[name] for p in parts]) for name in parts[0]})


def raw_encode(embedder, texts: Sequence[str], parallel: bool | None = None) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one raw encode of the texts; `parallel` True/False forces the
    tokenizer's parallelism for this call (TOKENIZERS_PARALLELISM is read on every call), None keeps the
    process's setting (raglake's choice for the device)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    if parallel is not None:
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if parallel else "false"
    try:
        t0, c0 = time.perf_counter(), cpu_seconds()
        embedder.sentence_transformer.encode(list(texts), batch_size=64, normalize_embeddings=True)
        return time.perf_counter() - t0, cpu_seconds() - c0
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def forced_tokenizer_encodes(embedder, texts: Sequence[str], repeat: int) -> dict[bool, list[float]]:
    """sentence-transformers' own encode with its tokenizer forced serial (False) and parallel (True, its
    default where nothing forked), `repeat` times each, interleaved: wall seconds by setting."""
    forced: dict[bool, list[float]] = {False: [], True: []}
    for rep in range(repeat):
        for parallel in (False, True) if rep % 2 == 0 else (True, False):
            gc.collect()
            forced[parallel].append(raw_encode(embedder, texts, parallel)[0])
    return forced


def forced_lines(forced: dict[bool, list[float]], n_texts: int) -> list[str]:
    return [
        fmt_row(
            f"(1{'ps'[not parallel]}) raw encode, tokenizer forced {('serial', 'parallel')[parallel]}",
            min(times),
            f"{n_texts / min(times):,.0f} texts/s (fastest of {len(times)}; "
            f"raglake's setting here: TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM')})",
        )
        for parallel, times in forced.items()
        if times
    ]


def fmt_row(label: str, seconds: float, extra: str = "") -> str:
    return f"{label:<50}{seconds:>9.2f} s  {extra}"


class StageResult:
    def __init__(self) -> None:
        self.collect = self.encode = self.model = self.score = self.cpu = 0.0
        self.requested = self.distinct = self.encoded = 0
        self.scored = ScoredBatch()

    @property
    def total(self) -> float:
        return self.collect + self.encode + self.score

    @property
    def embedding(self) -> float:
        """What the flow's embed-texts task does (the CLI's embedding stage): collect + encode, no scoring."""
        return self.collect + self.encode


def forget_memos() -> None:
    """Start as a fresh process does: no memoised sentence splits, content words or text keys."""
    sentences.clear_memo()
    words.clear_memo()
    text_key.cache_clear()


def raglake_stage(pairs, embedder, metrics, config: ScoringConfig, cache_root: str | None) -> StageResult:
    """What the evaluate flow does after capture: embed_texts (collect + one encode), then score batches."""
    out = StageResult()
    forget_memos()
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    texts = collect_texts(pairs, config.k, metrics)
    t1 = time.perf_counter()
    encoder = TextEncoder(embedder, EmbeddingCache(cache_root, embedder.key, embedder.device))
    encoder.encode(texts, caller="metrics")
    t2 = time.perf_counter()
    encoded_before_scoring = encoder.stats.encoded
    out.scored = score_pairs(pairs, metrics, config, encoder=encoder)
    t3 = time.perf_counter()
    out.cpu = cpu_seconds() - c0
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


def seed_texts(case: GoldenCase, cap: Capture, k: int) -> int:
    """How many texts the seed's way encodes for one case."""
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


def per_case(scores: dict[str, list]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for cid, name, value, status in zip(scores["case_id"], scores["metric"], scores["value"], scores["status"]):
        if status == "ok":
            out.setdefault(name, {})[cid] = value
    return out


def agreement_lines(
    ours: dict[str, dict[str, float]], seed_vals: dict[str, dict[str, float]], prefix_ids: set[str], same_disk: bool
) -> list[str]:
    """Per metric: cases scored, raglake's mean, and on the seed's prefix of cases both means and the
    largest per-case difference."""
    out = [
        f"{'metric':<24}{'n ok':>7}{'mean raglake':>14}{'raglake*':>10}{'seed*':>10}{'max |diff|*':>13}   "
        f"* on the first {len(prefix_ids):,} cases; disk == memory: {'yes' if same_disk else 'NO'}"
    ]
    for name in SENTENCE_METRICS:
        vals = ours.get(name, {})
        sv = seed_vals.get(name, {})
        common = [c for c in sv if c in vals]
        diff = max((abs(vals[c] - sv[c]) for c in common), default=float("nan"))
        sub = [v for c, v in vals.items() if c in prefix_ids]
        missing = len(set(sv) ^ {c for c in vals if c in prefix_ids})
        seed_mean = math.fsum(sv.values()) / len(sv) if sv else float("nan")
        out.append(
            f"{name:<24}{len(vals):>7,}{math.fsum(vals.values()) / max(len(vals), 1):>14.4f}"
            f"{math.fsum(sub) / max(len(sub), 1):>10.4f}{seed_mean:>10.4f}{diff:>13.1e}"
            + (f"   {missing} case(s) defined in one only" if missing else "")
        )
    return out


def split_line(r: StageResult) -> str:
    """Where stage (2)'s time went."""
    return (
        f"{'':<8}collect_texts {r.collect:.2f} s | encode {r.encode:.2f} s (model {r.model:.2f} s, "
        f"{r.encoded:,} texts encoded) | score_columnar x{math.ceil(len(set(r.scored.scores['case_id'])) / BATCH)} "
        f"{r.score:.2f} s"
    )


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


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
                return "/".join(parts[parts.index(anchor) :]) + f":{line}({func})"
        return f"{Path(file).name}:{line}({func})"

    rows = sorted(st.stats.items(), key=lambda kv: kv[1][3], reverse=True)
    out = io.StringIO()
    out.write(f"profiled stage: {wall:.2f} s wall under cProfile ({total:.2f} s of own time counted)\n")
    model = sum(
        v[3]
        for k, v in st.stats.items()
        if k[0].endswith(os.path.join("raglake", "embed", "model.py")) and k[2] == "encode"
    )
    out.write(
        f"inside Embedder.encode (the model call): {model:.2f} s = {100 * model / total:.1f}%; "
        f"everything else raglake does: {total - model:.2f} s = {100 * (total - model) / total:.1f}%\n"
    )
    out.write("by cumulative time (share of the profiled stage):\n")
    shown = 0
    for key, (_cc, nc, tt, ct, _) in rows:
        if "raglake" not in key[0] and "sentence_transformers" not in key[0] and key[2] not in ("score_columnar",):
            continue
        out.write(f"  {ct:8.2f} s {100 * ct / total:6.1f}%  own {tt:7.2f} s  calls {nc:>9,}  {name(key)}\n")
        shown += 1
        if shown >= top:
            break
    out.write("by own time (share of the profiled stage):\n")
    for key, (_cc, nc, tt, _ct, _) in sorted(st.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]:
        out.write(f"  {tt:8.2f} s {100 * tt / total:6.1f}%  calls {nc:>9,}  {name(key)}\n")
    return out.getvalue()
