"""Embedding metrics (METRICS.md §4): the arithmetic with a stub embedder of hand-chosen vectors,
the NaN policy, each distinct text encoded once (and never again with a cache), and one check with
the real packaged model."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_batch, score_one

VECTOR_METRICS = (
    "context_relevance",
    "context_sufficiency",
    "answer_relevance_emb",
    "answer_correctness_emb",
    "semantic_similarity",
    "answer_hallucination",
    "answer_hallucination_score",
    "answer_hallucination_chunk_cos",
)


HALLUCINATION = ("answer_hallucination", "answer_hallucination_score", "answer_hallucination_chunk_cos")


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float64)
    return (v / np.linalg.norm(v)).astype(np.float32)


# questions
Q1 = "Which database does Atlas use?"  # (1, 0, 0)
Q2 = "When is the launch?"  # (0, 1, 0)
# chunks
CH_A = "We run Postgres 16."  # (1, 0, 0)        cos(Q1, ·) = 1
CH_B = "Postgres is a database."  # (.6, .8, 0)  cos(Q1, ·) = 0.6
CH_C = "The team meets on Mondays."  # (0, 1, 0)  cos(Q1, ·) = 0
CH_FAR = "A chunk beyond rank K."  # no vector: it must never be asked for
# answers and their sentences
S1 = "Atlas uses Postgres."  # (1, 0, 0)
S2 = "It runs on Tuesdays."  # (0, 0, 1)
S3 = "The owner approved it."  # (.6, 0, .8)
A1 = f"{S1} {S2} {S3}"  # (.8, .6, 0)
A2 = "The launch is in May."  # (.6, .8, 0)
ABSTAIN = "I could not find this in the notes."  # (0, 0, 1)
# references
REF1 = "Atlas keeps its data in Postgres."  # (0, .6, .8)
REF2 = "It launches in March."  # (-.6, 0, .8)

VECTORS = {
    Q1: unit(1, 0, 0),
    Q2: unit(0, 1, 0),
    CH_A: unit(1, 0, 0),
    CH_B: unit(0.6, 0.8, 0),
    CH_C: unit(0, 1, 0),
    S1: unit(1, 0, 0),
    S2: unit(0, 0, 1),
    S3: unit(0.6, 0, 0.8),
    A1: unit(0.8, 0.6, 0),
    A2: unit(0.6, 0.8, 0),
    ABSTAIN: unit(0, 0, 1),
    REF1: unit(0, 0.6, 0.8),
    REF2: unit(-0.6, 0, 0.8),
}


class StubEmbedder:
    """Fixed vectors per text; records every call to encode."""

    dimension = 3

    def __init__(self, key: str = "stub@0", vectors: dict[str, np.ndarray] | None = None):
        self.key = key
        self.vectors = VECTORS if vectors is None else vectors
        self.calls: list[list[str]] = []

    def encode(self, texts) -> np.ndarray:
        texts = list(texts)
        self.calls.append(texts)
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)

    @property
    def encoded(self) -> list[str]:
        return [t for call in self.calls for t in call]


class ConstantEmbedder(StubEmbedder):
    """Another model: every text gets the same vector (so every cosine is 1)."""

    def encode(self, texts) -> np.ndarray:
        texts = list(texts)
        self.calls.append(texts)
        return np.tile(unit(1, 0, 0), (len(texts), 1))


def stub_encoder(stub: StubEmbedder | None = None, root: Path | None = None) -> TextEncoder:
    stub = stub or StubEmbedder()
    return TextEncoder(stub, EmbeddingCache(root, stub.key))


def chunks(*texts: str, start: int = 1) -> list[dict]:
    return [
        {"rank": start + i, "rel_path": f"notes/{start + i}.md", "heading_path": "H", "text": t}
        for i, t in enumerate(texts)
    ]


def case(cid: str, question: str, reference: str | None) -> GoldenCase:
    return GoldenCase(id=cid, question=question, reference_answer=reference)


def capture(cid: str, answer: str, retrieved: list[dict] = (), **kw) -> Capture:
    return Capture(case_id=cid, answer=answer, retrieved=list(retrieved), **kw)


def metrics(*names: str):
    return [get_metric(n) for n in (names or VECTOR_METRICS)]


def table(batch) -> dict[tuple[str, str], dict]:
    s = batch.scores
    return {(s["case_id"][i], s["metric"][i]): {c: s[c][i] for c in s} for i in range(len(s["case_id"]))}


def values(batch) -> dict[tuple[str, str], float]:
    return {k: r["value"] for k, r in table(batch).items()}


# ---------------------------------------------------------------------------------------------- arithmetic


def hand_batch(config: ScoringConfig = ScoringConfig()):
    pairs = [
        # h: 3 chunks in the top 5 (cos to Q1: 1, .6, 0) and one at rank 6 (outside K)
        (case("h", Q1, REF1), capture("h", A1, chunks(CH_A, CH_B, CH_C) + chunks(CH_FAR, start=6))),
        # neg: cos(answer, reference) is negative
        (case("neg", Q2, REF2), capture("neg", A2, chunks(CH_C))),
    ]
    return score_batch(pairs, metrics(), config, encoder=stub_encoder())


def test_hand_checked_values_with_default_thresholds() -> None:
    got = values(hand_batch())
    # context_relevance, h: mean(cos(Q1, A)=1, cos(Q1, B)=.6, cos(Q1, C)=0) = 1.6 / 3; rank 6 is not in the top 5
    assert got["h", "context_relevance"] == pytest.approx(1.6 / 3, abs=1e-6)
    # context_sufficiency, θs = .5: A (1) and B (.6) pass, C (0) does not; missing ranks 4, 5 count: 2 / K = 2 / 5
    assert got["h", "context_sufficiency"] == pytest.approx(0.4, abs=1e-6)
    # answer_relevance_emb: (1,0,0)·(.8,.6,0) = .8
    assert got["h", "answer_relevance_emb"] == pytest.approx(0.8, abs=1e-6)
    # answer_correctness_emb: (.8,.6,0)·(0,.6,.8) = .36
    assert got["h", "answer_correctness_emb"] == pytest.approx(0.36, abs=1e-6)
    # semantic_similarity: max(0, .36) = .36
    assert got["h", "semantic_similarity"] == pytest.approx(0.36, abs=1e-6)
    # answer_hallucination, support = .7·best cos to a chunk sentence + .3·coverage, θh = .7. The chunks' content
    # words: {run, postgre, 16, database, team, meet, monday}.
    # S1 "Atlas uses Postgres.": cos 1 (A), words atla, use, postgre → 1/3 covered: .7 + .1 = .8 (supported)
    # S2 "It runs on Tuesdays.": cos 0, words run, tuesday → 1/2: .15 (unsupported)
    # S3 "The owner approved it.": cos .6 (A), words owner, approv → 0: .42 (unsupported) → 2 / 3
    assert got["h", "answer_hallucination"] == pytest.approx(2 / 3, abs=1e-6)
    # answer_hallucination_score: max of 1 − support = 1 − .15
    assert got["h", "answer_hallucination_score"] == pytest.approx(0.85, abs=1e-6)
    # answer_hallucination_chunk_cos (the first rule, θ = .4 on whole chunks): S1 1, S2 0, S3 .6 → 1 / 3
    assert got["h", "answer_hallucination_chunk_cos"] == pytest.approx(1 / 3, abs=1e-6)

    # neg: one chunk C = (0,1,0) = Q2 → relevance 1, sufficiency 1 / K = .2
    assert got["neg", "context_relevance"] == pytest.approx(1.0, abs=1e-6)
    assert got["neg", "context_sufficiency"] == pytest.approx(0.2, abs=1e-6)
    # answer_relevance_emb: (0,1,0)·(.6,.8,0) = .8
    assert got["neg", "answer_relevance_emb"] == pytest.approx(0.8, abs=1e-6)
    # answer_correctness_emb: (.6,.8,0)·(-.6,0,.8) = -.36 (a raw cosine, may be negative)
    assert got["neg", "answer_correctness_emb"] == pytest.approx(-0.36, abs=1e-6)
    # semantic_similarity: max(0, -.36) = 0 exactly
    assert got["neg", "semantic_similarity"] == 0.0
    # answer_hallucination: the one sentence "The launch is in May." (= the answer) has cos .8 to C but none of its
    # content words (launch; "may" is a stop word) is in C: support .56 < .7 → 1 / 1; the first rule: .8 ≥ .4 → 0
    assert got["neg", "answer_hallucination"] == pytest.approx(1.0, abs=1e-6)
    assert got["neg", "answer_hallucination_score"] == pytest.approx(0.44, abs=1e-6)
    assert got["neg", "answer_hallucination_chunk_cos"] == pytest.approx(0.0, abs=1e-6)


def test_thresholds_and_k_are_run_configuration() -> None:
    got = values(hand_batch(ScoringConfig(theta_s=0.7, theta_h=0.4, theta_h_chunk_cos=0.65)))
    # θs = .7: only A (1) passes → 1 / 5
    assert got["h", "context_sufficiency"] == pytest.approx(0.2, abs=1e-6)
    # θh = .4: only S2 (support .15) is unsupported, S3 (.42) now passes → 1 / 3; the score ignores θh
    assert got["h", "answer_hallucination"] == pytest.approx(1 / 3, abs=1e-6)
    assert got["h", "answer_hallucination_score"] == pytest.approx(0.85, abs=1e-6)
    # the first rule at .65: S2 (0) and S3 (.6) are unsupported → 2 / 3
    assert got["h", "answer_hallucination_chunk_cos"] == pytest.approx(2 / 3, abs=1e-6)
    # k = 3: the denominator is K = 3 (A and B pass at θs = .5) → 2 / 3; k = 2: top 2 are A, B → relevance 1.6 / 2
    got_k3 = values(hand_batch(ScoringConfig(k=3)))
    assert got_k3["h", "context_sufficiency"] == pytest.approx(2 / 3, abs=1e-6)
    got_k2 = values(hand_batch(ScoringConfig(k=2)))
    assert got_k2["h", "context_relevance"] == pytest.approx(0.8, abs=1e-6)
    assert got_k2["h", "context_sufficiency"] == pytest.approx(1.0, abs=1e-6)


def test_score_one_uses_the_given_encoder_and_settings() -> None:
    c, cap = case("h", Q1, REF1), capture("h", A1, chunks(CH_A, CH_B, CH_C))
    enc = stub_encoder()
    s = score_one(c, cap, "context_sufficiency", encoder=enc, theta_s=0.7)
    assert (s.status, s.model) == ("ok", "stub@0")
    assert s.value == pytest.approx(0.2, abs=1e-6)  # 1 / 5 as above
    s = score_one(c, cap, "answer_hallucination", encoder=enc, theta_h=0.4)
    assert s.value == pytest.approx(1 / 3, abs=1e-6)  # S2 only, as above


def test_every_ok_row_carries_the_embedder_key() -> None:
    rows = table(hand_batch())
    assert len(rows) == 2 * len(VECTOR_METRICS)
    assert all(r["status"] == "ok" for r in rows.values())
    assert {r["embedder"] for r in rows.values()} == {"stub@0"}
    other = StubEmbedder(key="stub@other")
    batch = score_batch(
        [(case("h", Q1, REF1), capture("h", A1, chunks(CH_A)))], metrics(), ScoringConfig(), encoder=stub_encoder(other)
    )
    assert set(batch.scores["embedder"]) == {"stub@other"}


# ---------------------------------------------------------------------------------------------- NaN policy


def test_nan_policy() -> None:
    pairs = [
        (case("empty", Q1, REF1), capture("empty", "", chunks(CH_A))),
        (case("blank", Q1, REF1), capture("blank", "  \n\t ", chunks(CH_A))),
        (case("noref", Q2, None), capture("noref", A2, chunks(CH_C))),
        (case("blankref", Q2, "   "), capture("blankref", A2, chunks(CH_C))),
        (case("nochunks", Q1, REF1), capture("nochunks", S1, [])),
        (case("abstained", Q1, REF1), capture("abstained", ABSTAIN, chunks(CH_A), abstained=True)),
        (case("failed", Q1, REF1), capture("failed", "", chunks(CH_A), status="error", error="HTTP 502")),
    ]
    stub = StubEmbedder()
    rows = table(score_batch(pairs, metrics(), ScoringConfig(), encoder=stub_encoder(stub)))

    def check(cid: str, metric: str, reason: str | None, value: float | None = None) -> None:
        r = rows[cid, metric]
        if reason is None:
            assert r["status"] == "ok", (cid, metric, r)
            assert r["value"] == pytest.approx(value, abs=1e-6), (cid, metric)
            assert r["embedder"] == "stub@0"
        else:
            assert (r["status"], r["reason"]) == ("undefined", reason), (cid, metric, r)
            assert math.isnan(r["value"]), (cid, metric)

    for cid in ("empty", "blank"):
        for m in ("answer_relevance_emb", "answer_correctness_emb", "semantic_similarity", *HALLUCINATION):
            check(cid, m, "empty_answer")
        check(cid, "context_relevance", None, 1.0)  # the question and its chunk are still there: cos(Q1, A) = 1
        check(cid, "context_sufficiency", None, 0.2)  # 1 / 5
    for cid in ("noref", "blankref"):
        check(cid, "answer_correctness_emb", "no_reference")
        check(cid, "semantic_similarity", "no_reference")
        check(cid, "answer_relevance_emb", None, 0.8)  # (0,1,0)·(.6,.8,0)
        check(cid, "answer_hallucination", None, 1.0)  # support .56 < .7 (see the hand-checked values)
        check(cid, "answer_hallucination_chunk_cos", None, 0.0)  # cos(A2, C) = .8 ≥ .4
    for m in ("context_relevance", "context_sufficiency", *HALLUCINATION):
        check("nochunks", m, "no_chunks")
    check("nochunks", "answer_relevance_emb", None, 1.0)  # (1,0,0)·(1,0,0)
    check("nochunks", "answer_correctness_emb", None, 0.0)  # (1,0,0)·(0,.6,.8)
    check("abstained", "answer_relevance_emb", "abstained")
    for m in HALLUCINATION:
        check("abstained", m, "abstained")
    check("abstained", "context_relevance", None, 1.0)
    for m in VECTOR_METRICS:
        check("failed", m, "capture_failed")
    # no vector was made for a whitespace-only text
    assert all(t.strip() for t in stub.encoded)


# ---------------------------------------------------------------------------------------------- encode once


SHARED = [
    (case("k1", Q1, REF1), capture("k1", S1, chunks(CH_A, CH_B))),
    (case("k2", Q1, REF1), capture("k2", S2, chunks(CH_B, CH_C))),
    (case("k3", Q2, REF2), capture("k3", A2, chunks(CH_A, CH_C))),
    (case("k4", Q2, REF2), capture("k4", A1, chunks(CH_A) + chunks(CH_FAR, start=6))),  # A1's sentences are S1..S3
    (case("k5", Q1, REF1), capture("k5", "", [], status="timeout")),
]
# every distinct text of the batch: 2 questions, answers S1, S2, A2, A1 and sentence S3, 2 references, 3 chunks
DISTINCT = sorted([Q1, Q2, S1, S2, A2, A1, S3, REF1, REF2, CH_A, CH_B, CH_C])


def test_each_distinct_text_is_encoded_once_in_one_call() -> None:
    stub = StubEmbedder()
    enc = stub_encoder(stub)
    first = score_batch(SHARED, metrics(), ScoringConfig(), encoder=enc)
    assert len(stub.calls) == 1  # one large batch
    assert sorted(stub.calls[0]) == DISTINCT  # each text exactly once (no duplicates, nothing missing)
    assert enc.stats.encoded == len(DISTINCT)

    again = score_batch(SHARED, metrics(), ScoringConfig(), encoder=enc)
    assert len(stub.calls) == 1 and stub.encoded == stub.calls[0]  # the same encoder encodes nothing more
    assert values(again) == values(first)


def test_the_disk_cache_is_shared_by_key_and_only_by_key(tmp_path: Path) -> None:
    first_stub = StubEmbedder()
    first = score_batch(SHARED, metrics(), ScoringConfig(), encoder=stub_encoder(first_stub, tmp_path))
    assert sorted(first_stub.encoded) == DISTINCT

    # a new encoder (as in a new process) over the same folder and key: nothing is encoded
    second_stub = StubEmbedder()
    second = score_batch(SHARED, metrics(), ScoringConfig(), encoder=stub_encoder(second_stub, tmp_path))
    assert second_stub.encoded == []
    assert values(second) == values(first)

    # another model over the same folder does not reuse those vectors
    other = ConstantEmbedder(key="stub@1")
    third = score_batch(SHARED, metrics(), ScoringConfig(), encoder=stub_encoder(other, tmp_path))
    assert sorted(other.encoded) == DISTINCT
    rows = table(third)
    assert rows["k2", "context_relevance"]["value"] == pytest.approx(1.0, abs=1e-6)  # every cos is 1 with stub@1
    assert values(first)["k2", "context_relevance"] == pytest.approx(0.3, abs=1e-6)  # mean(.6, 0) with stub@0
    assert {r["embedder"] for r in rows.values() if r["status"] == "ok"} == {"stub@1"}


# ---------------------------------------------------------------------------------------------- real model


def test_real_model_paraphrase_beats_unrelated() -> None:
    from raglake.embed.encoders import default_encoder

    reference = "The meeting was postponed until next week."
    pairs = [
        (
            case("para", "When is the meeting?", reference),
            capture("para", "They moved the meeting to the following week."),
        ),
        (case("unrel", "When is the meeting?", reference), capture("unrel", "Bananas are a good source of potassium.")),
    ]
    enc = default_encoder()
    rows = table(
        score_batch(pairs, metrics("semantic_similarity", "answer_correctness_emb"), ScoringConfig(), encoder=enc)
    )
    for m in ("semantic_similarity", "answer_correctness_emb"):
        assert rows["para", m]["value"] > rows["unrel", m]["value"] + 0.2, m
        assert rows["para", m]["embedder"] == enc.embedder.key
    assert enc.embedder.key.startswith("sentence-transformers/all-MiniLM-L6-v2@")
