"""The cosine metrics' columnar forms (raglake.metrics.columnar_vectors; issue 29, item 3: on a GPU their
per-case scoring was the larger half of the run) give exactly their functions' rows: every column of
scores and sentence_scores, floats compared with ==, on the sample (the packaged model) and on generated
batches (blank and repeated texts, abstentions, failed captures, answers without a sentence, tied and NaN
cosines). Both paths take their cosines from raglake.embed.cosine; a row's cosine does not depend on the
other rows it is computed with. A batch of vector metrics builds no pydantic model."""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.cosine import pair_cosines
from raglake.embed.encoders import default_encoder
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric
from raglake.pipeline.scoring import score_columnar
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_batch
from tests.test_columnar_scoring import _both, _sample_pairs, _write, assert_same_tables

VECTOR_METRICS = [m for m in all_metrics("case") if m.texts]


class TinyEmbedder:
    """Deterministic 6-dimensional unit vectors from a text's hash (ties for equal texts); NaN for one text."""

    key = "tiny@0"
    dimension = 6
    device = "cpu"

    def encode(self, texts) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, t in enumerate(texts):
            if t == "Not a number.":
                out[i] = np.nan
                continue
            v = np.frombuffer(hashlib.sha256(t.encode()).digest()[: self.dimension], dtype=np.uint8) - 127.5
            out[i] = v / np.linalg.norm(v)
        return out


def _encoder() -> TextEncoder:
    return TextEncoder(TinyEmbedder(), EmbeddingCache(None, TinyEmbedder.key))


def test_every_cosine_metric_has_a_columnar_form() -> None:
    names = {m.name for m in VECTOR_METRICS}
    assert {"context_relevance", "semantic_similarity", "answer_hallucination"} <= names
    assert all(m.columnar is not None for m in VECTOR_METRICS), [m.name for m in VECTOR_METRICS if not m.columnar]


@pytest.mark.parametrize("k", [1, 5])
def test_the_sample_scores_identically_with_the_packaged_model(k: int, tmp_path: Path) -> None:
    pairs = _sample_pairs(0)
    config = ScoringConfig(k=k)
    _both(pairs, VECTOR_METRICS, config, tmp_path, encoder=default_encoder())


def test_a_batch_of_vector_metrics_builds_no_model_and_calls_no_function(tmp_path: Path) -> None:
    pairs = [p for p in _sample_pairs(1) if p[1].answer.strip()]
    batch = ColumnarBatch.from_models(pairs)

    def refuse(*_a, **_k):
        raise AssertionError("a per-case metric function ran")

    metrics = [dataclasses.replace(m, fn=refuse) for m in VECTOR_METRICS]
    tables = score_columnar(batch, metrics, ScoringConfig(k=5), encoder=_encoder()).tables()
    assert tables["scores"].num_rows == len(pairs) * len(metrics)
    assert tables["sentence_scores"].num_rows > 0
    assert not batch._models, "no pydantic model was built"


def test_a_row_s_cosine_does_not_depend_on_the_rows_beside_it() -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal((50, 384)).astype(np.float32)
    b = rng.standard_normal((40, 384)).astype(np.float32)
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    left, right = rng.integers(0, 50, 20_000), rng.integers(0, 40, 20_000)  # more than one block
    whole = pair_cosines(a, left, b, right)
    for i in rng.integers(0, 20_000, 200).tolist():
        assert pair_cosines(a, left[i : i + 1], b, right[i : i + 1])[0] == whole[i]
    exact = np.einsum("ij,ij->i", a[left].astype(np.float64), b[right].astype(np.float64))
    assert np.abs(whole - exact).max() < 1e-12
    assert np.abs(whole - (a[left] * b[right]).sum(axis=1)).max() > 0  # float32 sums differ: the routine matters


QUESTIONS = ["Which database?", "When is the launch?", "Who owns it?"]
REFERENCES = [None, "", "   ", "It runs Postgres 16.", "The launch is in May. It moved twice."]
ANSWERS = [
    "",
    "  ",
    "I don't know.",
    "It runs Postgres 16.",
    "It runs Postgres 16. The launch is in May. Nobody owns it.",
    "...",
    "We run Postgres 16. We run Postgres 16.",
]
CHUNKS = [
    "",
    "   ",
    "We run Postgres 16.",
    "We run Postgres 16.",
    "The launch is in May. It moved twice. Ops owns the rota.",
    "Nothing relevant here",
]


@st.composite
def vector_batch(draw: st.DrawFn) -> list[tuple[GoldenCase, Capture]]:
    pairs = []
    for i in range(draw(st.integers(1, 6))):
        cid = f"c{i}"
        ranks = draw(st.lists(st.integers(1, 8), unique=True, max_size=6))
        retrieved = [
            {"rel_path": "a.md", "heading_path": "", "rank": r, "text": draw(st.sampled_from(CHUNKS))} for r in ranks
        ]
        case = GoldenCase(
            id=cid, question=draw(st.sampled_from(QUESTIONS)), reference_answer=draw(st.sampled_from(REFERENCES))
        )
        capture = Capture(
            case_id=cid,
            answer=draw(st.sampled_from(ANSWERS)),
            abstained=draw(st.sampled_from([None, None, True, False])),
            status=draw(st.sampled_from(["ok", "ok", "ok", "error"])),
            retrieved=retrieved,
        )
        pairs.append((case, capture))
    return pairs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vector_batch(), st.integers(1, 6), st.sampled_from([0.0, 0.3, 0.5]), st.sampled_from([0.0, 0.4, 0.7, 0.9]))
def test_generated_batches_score_identically(pairs, k: int, theta_s: float, theta_h: float) -> None:
    config = ScoringConfig(k=k, theta_s=theta_s, theta_h=theta_h, theta_h_chunk_cos=theta_h)
    with tempfile.TemporaryDirectory() as folder:
        cases = _write(Path(folder) / "cases.jsonl", [c.model_dump_json() for c, _ in pairs])
        captures = _write(Path(folder) / "captures.jsonl", [x.model_dump_json() for _, x in pairs])
        batch = ColumnarBatch.from_files(cases, captures)
        expected = score_batch(pairs, VECTOR_METRICS, config, encoder=_encoder()).tables()
        assert_same_tables(score_columnar(batch, VECTOR_METRICS, config, encoder=_encoder()).tables(), expected)


def test_a_nan_vector_is_the_function_s_to_judge_on_both_paths(tmp_path: Path) -> None:
    """An embedder's NaN vector: a context sentence of it leaves the case to answer_hallucination's function
    (which scores it); a NaN cosine as a value is refused by Score.ok on both paths."""
    nan_chunk = {"rel_path": "a.md", "heading_path": "", "rank": 2, "text": "Not a number."}
    good = {"rel_path": "a.md", "heading_path": "", "rank": 1, "text": "We run Postgres 16."}
    pairs = [
        (
            GoldenCase(id=f"c{i}", question="Which database?", reference_answer="Postgres 16."),
            Capture(case_id=f"c{i}", answer="It runs Postgres 16. Ops owns it.", retrieved=chunks),
        )
        for i, chunks in enumerate([[good, nan_chunk], [good]])
    ]
    names = ("answer_hallucination", "answer_hallucination_score", "answer_hallucination_chunk_cos")
    scored = [get_metric(n) for n in names]  # a NaN best cosine is not below the threshold: a number
    config = ScoringConfig(k=5)
    expected = score_batch(pairs, scored, config, encoder=_encoder()).tables()
    assert expected["scores"].column("status").to_pylist() == ["ok"] * 6
    _both(pairs, scored, config, tmp_path, encoder=_encoder())
    batch = ColumnarBatch.from_files(tmp_path / "cases.jsonl", tmp_path / "captures.jsonl")  # as _both wrote them
    score_columnar(batch, scored, config, encoder=_encoder())
    assert sorted(batch._models) == [0], "only the case left to the function is built as a model"
    relevance = [get_metric("context_relevance")]  # the mean of a NaN cosine is NaN
    with pytest.raises(ValueError, match="an ok score needs a number"):
        score_batch(pairs, relevance, config, encoder=_encoder())
    with pytest.raises(ValueError, match="an ok score needs a number"):
        score_columnar(ColumnarBatch.from_models(pairs), relevance, config, encoder=_encoder()).tables()


def test_without_an_encoder_the_forms_say_what_is_missing() -> None:
    batch = ColumnarBatch.from_models(_sample_pairs(0)[:3])
    with pytest.raises(Exception, match="no embedder was given"):
        score_columnar(batch, [get_metric("semantic_similarity")], ScoringConfig(k=5))
