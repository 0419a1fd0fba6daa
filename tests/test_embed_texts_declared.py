"""Each metric declares the kinds of text whose vectors it reads (`texts=` at registration), and a run
encodes only the union over the metrics it computes (issue 12, item 4). The declarations are checked
against the metrics themselves: a table of exactly the declared texts gives the values of the full
table (nothing read is missing), and leaving any declared kind out breaks some case (nothing declared
is idle). BERTScore reads token embeddings, never the table, with or without idf."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import pytest

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.encoders import default_encoder
from raglake.embed.texts import (
    TEXT_KINDS,
    VectorTable,
    case_texts,
    collect_batch_texts,
    collect_texts,
    text_kinds,
)
from raglake.errors import ConfigError
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric, register
from raglake.pipeline.embedding import EmbeddingInputs, prepare_embeddings, reference_idf
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from raglake.text.sentences import split_sentences
from tests.rowpath import score_batch

TABLE_METRICS = [m for m in all_metrics(level="case") if m.texts]
EMBEDDING_FAMILY = [m for m in all_metrics(level="case") if m.family == "embedding"]


class HashEmbedder:
    """A distinct, fixed unit vector per text (from its hash); records what it is asked to encode."""

    key = "hash@0"
    dimension = 16

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts) -> np.ndarray:
        texts = list(texts)
        self.encoded += texts
        out = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dimension)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dimension)


def _chunks(*texts: str, start: int = 1) -> list[dict]:
    return [{"rank": start + i, "rel_path": f"n/{start + i}.md", "text": t} for i, t in enumerate(texts)]


def _pair(cid: str, question: str, reference: str | None, answer: str, retrieved=(), **kw):
    return (
        GoldenCase(id=cid, question=question, reference_answer=reference),
        Capture(case_id=cid, answer=answer, retrieved=list(retrieved), **kw),
    )


PAIRS = [
    _pair(
        "full",
        "Which database does Atlas use?",
        "Atlas keeps its data in Postgres 16.",
        "Atlas uses Postgres. It runs on a dedicated server. The owner approved it.",
        _chunks("We run Postgres 16.", "The server sits in rack 4.", "The team meets on Mondays.")
        + _chunks("Beyond the cut-off.", start=6),
    ),
    _pair("one", "When is the launch?", "It launches in March.", "The launch is in May.", _chunks("Launch: May 12.")),
    _pair("noref", "Who owns billing?", None, "Dana owns billing. Since 2024.", _chunks("Billing: Dana.")),
    _pair("nochunks", "What colour is the logo?", "Blue.", "The logo is blue."),
    _pair("empty", "Where is the office?", "In Lyon.", "  ", _chunks("The office is in Lyon.")),
    _pair(
        "abst", "My PIN?", "Not in the notes.", "I could not find this.", _chunks("PINs are secret."), abstained=True
    ),
    _pair("failed", "Anything?", "Yes.", "", _chunks("A chunk."), status="error", error="HTTP 502"),
]
CONFIG = ScoringConfig(k=5)


def _full_table() -> VectorTable:
    """Today's table: every kind of text of every case."""
    texts = list(dict.fromkeys(t for c, x in PAIRS for t in case_texts(c, x, CONFIG.k)))
    return VectorTable.encode(TextEncoder(HashEmbedder(), EmbeddingCache(None, "hash@0")), texts)


def _scores(metric, table: VectorTable) -> dict[str, tuple]:
    inputs = EmbeddingInputs(vectors=table)
    out = {}
    for case, capture in PAIRS:
        s = score_context(CaseContext(case, capture, CONFIG, embeddings=inputs), [metric])[0][1]
        out[case.id] = (s.status, s.reason, None if math.isnan(s.value) else s.value)
    return out


def test_every_cosine_metric_of_the_embedding_family_declares_its_texts() -> None:
    vector_readers = [m for m in EMBEDDING_FAMILY if "vectors" in m.inputs]
    assert len(vector_readers) >= 6
    assert all(m.texts for m in vector_readers), [m.name for m in vector_readers if not m.texts]
    assert all(kind in TEXT_KINDS for m in TABLE_METRICS for kind in m.texts)
    # BERTScore reads token embeddings, not the table; the judge's answer_relevance encodes its own texts
    assert {m.name for m in EMBEDDING_FAMILY if not m.texts} == {
        "bert_score_f1",
        "bert_score_precision",
        "bert_score_recall",
    }
    assert get_metric("answer_relevance").texts == ()


@pytest.mark.parametrize("metric", TABLE_METRICS, ids=[m.name for m in TABLE_METRICS])
def test_a_table_of_only_the_declared_texts_gives_the_full_tables_values(metric) -> None:
    full = _full_table()
    declared = full.subset(collect_texts(PAIRS, CONFIG.k, [metric]))
    assert len(declared.rows) < len(full.rows)  # a real restriction, not the whole table again
    expected, got = _scores(metric, full), _scores(metric, declared)
    assert got == expected
    assert any(status == "ok" for status, _, _ in got.values())  # the cases exercise the metric


@pytest.mark.parametrize(
    ("metric", "kind"),
    [(m, kind) for m in TABLE_METRICS for kind in m.texts],
    ids=[f"{m.name}-{kind}" for m in TABLE_METRICS for kind in m.texts],
)
def test_every_declared_kind_is_read(metric, kind) -> None:
    """Without any one of its declared kinds the metric cannot score some case: no declaration is idle."""
    full = _full_table()
    others = [k for k in metric.texts if k != kind]
    table = full.subset(t for c, x in PAIRS for t in case_texts(c, x, CONFIG.k, others))
    with pytest.raises(KeyError, match="does the metric declare every kind of text"):
        _scores(metric, table)


def test_the_stage_encodes_the_union_of_the_selected_metrics_only() -> None:
    def encoded(*names: str) -> set[str]:
        stub = HashEmbedder()
        score_batch(PAIRS, [get_metric(n) for n in names], CONFIG, encoder=TextEncoder(stub, EmbeddingCache(None, "h")))
        assert len(stub.encoded) == len(set(stub.encoded))  # each text once
        return set(stub.encoded)

    live = [(c, x) for c, x in PAIRS if not x.failed]
    answers = {x.answer for _, x in live if x.answer.strip()}
    references = {c.reference_answer for c, _ in live if (c.reference_answer or "").strip()}
    questions = {c.question for c, _ in live}
    chunks = {ch.text for _, x in live for ch in x.top_k(CONFIG.k)}
    assert encoded("semantic_similarity") == answers | references
    assert encoded("answer_relevance_emb") == questions | answers
    assert encoded("context_relevance", "semantic_similarity") == questions | chunks | answers | references
    assert "Beyond the cut-off." not in encoded("context_relevance")  # rank 6 is outside the top 5
    # every metric: every kind of text (answer_hallucination reads the top-K chunks' sentences)
    everything = {t for c, x in PAIRS for t in case_texts(c, x, CONFIG.k, list(TEXT_KINDS))}
    assert encoded(*(m.name for m in TABLE_METRICS)) == everything
    assert text_kinds(EMBEDDING_FAMILY) == tuple(TEXT_KINDS)
    sentences = {s for _, x in live for t in x.top_k(CONFIG.k) for s in split_sentences(t.text)}
    assert encoded("answer_hallucination") == sentences | {s for a in answers for s in split_sentences(a)}
    # a retrieval metric or BERTScore alone reads no table at all
    assert collect_texts(PAIRS, CONFIG.k, [get_metric("recall_any_at_k"), get_metric("bert_score_f1")]) == []


def test_a_judge_metric_reading_vectors_builds_no_table() -> None:
    stub = HashEmbedder()
    inputs = prepare_embeddings(
        PAIRS, [get_metric("answer_relevance")], CONFIG, TextEncoder(stub, EmbeddingCache(None, "h"))
    )
    assert inputs is not None and inputs.vectors is None and stub.encoded == []


def test_a_declaration_is_checked_when_the_metric_registers() -> None:
    with pytest.raises(ConfigError, match="did you mean 'answer_sentences'"):
        register(
            "x_bad_kind",
            family="embedding",
            scale="0-1",
            higher_is_better=True,
            seed="003",
            inputs=("vectors",),
            texts=("answer_sentence",),
        )
    with pytest.raises(ValueError, match="does not read 'vectors'"):
        register(
            "x_no_vectors",
            family="embedding",
            scale="0-1",
            higher_is_better=True,
            seed="003",
            inputs=("answer",),
            texts=("answer",),
        )


@pytest.mark.parametrize("idf", [False, True], ids=["plain", "idf"])
def test_bertscore_needs_no_vector_table_with_or_without_idf(idf: bool) -> None:
    """BERTScore alone builds no table and encodes no sentence, and gives the values it gives beside
    every table metric (the real packaged model; idf over the cases' references, as embedding_spec does)."""
    encoder = default_encoder()
    config = ScoringConfig(k=5, bertscore_idf=idf)
    weights = reference_idf(encoder, [c.reference_answer or "" for c, _ in PAIRS], None) if idf else None
    before = encoder.stats.requested
    alone = prepare_embeddings(PAIRS, [get_metric("bert_score_f1")], config, encoder, weights)
    assert alone.vectors is None and encoder.stats.requested == before
    together = prepare_embeddings(PAIRS, [*TABLE_METRICS, get_metric("bert_score_f1")], config, encoder, weights)
    assert together.vectors is not None
    assert alone.bert == together.bert and alone.bert_id == together.bert_id
    assert alone.bert_id.endswith(":idf") == idf
    assert {cid for cid, s in alone.bert.items() if s is not None} == {"full", "one", "nochunks", "abst"}


@dataclass(frozen=True)
class Reads:
    """A metric as collect_texts sees it: the kinds of text it reads."""

    texts: tuple[str, ...]


def _columnar(pairs, folder) -> ColumnarBatch:
    cases, captures = folder / "cases.jsonl", folder / "captures.jsonl"
    cases.write_text("".join(c.model_dump_json() + "\n" for c, _ in pairs), encoding="utf-8")
    captures.write_text("".join(x.model_dump_json() + "\n" for _, x in pairs), encoding="utf-8")
    return ColumnarBatch.from_files(cases, captures)


@pytest.mark.parametrize("k", [1, 2, 5, 10])
def test_the_columnar_collection_gives_the_same_texts_in_the_same_order(k: int, tmp_path) -> None:
    """The embedding stage reads its batches as columns (no pydantic model per case, ~9x faster to read):
    the same distinct texts, in the same first-seen order, as collect_texts over the models, for every
    kind alone and all together, across batch boundaries."""
    more = PAIRS + [
        _pair("blank-chunk", "Blank?", "B.", "Some answer here.", _chunks("   ", "Real text. Two sentences.")),
        _pair("dup", "Which database does Atlas use?", "Blue.", "The logo is blue.", _chunks("We run Postgres 16.")),
    ]
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    batches = [_columnar(more[:4], first), _columnar(more[4:], second)]
    for kinds in [*([kind] for kind in TEXT_KINDS), list(TEXT_KINDS)]:
        metrics = [Reads(tuple(kinds))]
        assert collect_batch_texts(batches, k, metrics) == collect_texts(more, k, metrics), kinds
    assert collect_batch_texts(batches, k, [get_metric("recall_any_at_k")]) == []
