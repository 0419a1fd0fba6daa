"""The columnar path (score_files / score_columnar: bulk reading, vectorised metrics, Arrow tables) gives
exactly the per-case path's rows (tests/rowpath.py's score_batch over pydantic models): every column of
scores, labels and chunks, in the same order; floats compared with ==, NaN and None at the same places."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from raglake.columnar.batch import ColumnarBatch
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.golden import load_golden
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric
from raglake.pipeline.scoring import score_columnar, score_files
from raglake.pipeline.settings import SAMPLE_CAPTURES, SAMPLE_GOLDEN
from raglake.records import read_records, validate_record
from raglake.schemas import Capture, GoldenCase
from tests.judgekit import judge_outcomes
from tests.rowpath import score_batch

DETERMINISTIC = [m for m in all_metrics("case") if m.family in ("retrieval", "label", "abstention", "operational")]


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def assert_same_tables(ours: dict[str, pa.Table], theirs: dict[str, pa.Table]) -> None:
    assert set(ours) == set(theirs) == {"scores", "labels", "chunks", "sentence_scores"}
    for name in ours:
        assert ours[name].schema == theirs[name].schema, name
        a, b = ours[name].to_pydict(), theirs[name].to_pydict()
        for column in a:
            assert len(a[column]) == len(b[column]), (name, column)
            bad = [i for i, (x, y) in enumerate(zip(a[column], b[column])) if not _same(x, y)]
            if bad:
                i = bad[0]
                row = {c: a[c][i] for c in a}
                raise AssertionError(
                    f"{name}.{column} row {i}: columnar {a[column][i]!r}, per case {b[column][i]!r}; {row}"
                )


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def _both(pairs, metrics, config, folder: Path, **kw) -> None:
    """score_files over canonical dumps of the pairs against score_batch over the pairs."""
    cases = _write(folder / "cases.jsonl", [c.model_dump_json() for c, _ in pairs])
    captures = _write(folder / "captures.jsonl", [x.model_dump_json() for _, x in pairs])
    assert_same_tables(
        score_files(cases, captures, metrics, config, **kw).tables(), score_batch(pairs, metrics, config, **kw).tables()
    )


def _sample_pairs(index: int) -> list[tuple[GoldenCase, Capture]]:
    golden = load_golden(SAMPLE_GOLDEN)
    path = SAMPLE_CAPTURES[index].removeprefix("replay:")
    captures = {c.case_id: c for c in (validate_record(r, Capture, path) for r in read_records(path))}
    return [(case, captures[case.id]) for case in golden.cases]


@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("k, require_snippets", [(5, False), (3, True), (10, True), (1, False)])
def test_sample_data_scores_identically(index: int, k: int, require_snippets: bool, tmp_path: Path) -> None:
    pairs = _sample_pairs(index)
    assert any(c.labels for c, _ in pairs), "the sample carries human labels"
    _both(pairs, DETERMINISTIC, ScoringConfig(k=k, require_snippets=require_snippets), tmp_path)


@pytest.mark.parametrize("index", [0, 1])
def test_the_sample_files_as_people_write_them_score_identically(index: int) -> None:
    """The sample's own files (heading paths as "A > B" strings, fields left out) read in bulk, unconverted."""
    path = SAMPLE_CAPTURES[index].removeprefix("replay:")
    batch = ColumnarBatch.from_files(SAMPLE_GOLDEN, path)
    assert batch.golden.models is None and batch.captures.models is None, "read in bulk"
    config = ScoringConfig(k=5, require_snippets=True)
    expected = score_batch(_sample_pairs(index), DETERMINISTIC, config).tables()
    assert_same_tables(score_columnar(batch, DETERMINISTIC, config).tables(), expected)


def test_empty_files_and_files_of_different_lengths(tmp_path: Path) -> None:
    empty = _write(tmp_path / "empty.jsonl", [])
    tables = score_files(empty, empty, DETERMINISTIC, ScoringConfig()).tables()
    assert_same_tables(tables, score_batch([], DETERMINISTIC, ScoringConfig()).tables())
    one = _write(tmp_path / "one.jsonl", [GoldenCase(id="c", question="Q?").model_dump_json()])
    with pytest.raises(ValueError, match="holds 1 cases but .* 0 captures"):
        score_files(one, empty, DETERMINISTIC, ScoringConfig())


def test_the_sample_is_scored_in_columns_not_per_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards the test above: with no metric function callable, the sample still scores (ndcg_at_k's
    cases with a chunk matching two supports aside, which it leaves to its function)."""
    pairs = _sample_pairs(1)
    batch = ColumnarBatch.from_models(pairs)
    metrics = [m for m in DETERMINISTIC if m.name != "ndcg_at_k"]

    def refuse(*_a, **_k):
        raise AssertionError("a per-case metric function ran")

    metrics = [dataclasses.replace(m, fn=refuse) for m in metrics]
    table = score_columnar(batch, metrics, ScoringConfig(k=5)).tables()["scores"]
    assert table.num_rows == len(pairs) * len(metrics)
    assert not batch._models, "no pydantic model was built"


def test_metrics_without_a_columnar_form_and_a_judge_score_per_case(tmp_path: Path) -> None:
    """Metrics without a columnar form (their rows come from their functions, models built for the batch)
    beside one with a form that reads the encoder (semantic_similarity); with a judge, metrics that read a
    judge step and the labels table go per case as well."""
    pairs = _sample_pairs(0)[:24]
    names = ["recall_any_at_k", "ndcg_at_k", "semantic_similarity", "recency_rule_ok", "grounding_presence_rate"]
    metrics = [get_metric(n) for n in names] + [m for m in DETERMINISTIC if m.family == "abstention"]
    assert get_metric("semantic_similarity").columnar is not None
    config = ScoringConfig(k=4)
    encoder = TextEncoder(_HashEmbedder(), EmbeddingCache(None, "hash@0"))
    _both(pairs, metrics, config, tmp_path, encoder=encoder)
    judge = judge_outcomes(pairs, metrics, config)
    _both(pairs, metrics, config, tmp_path, encoder=encoder, judge=judge)


class _HashEmbedder:
    """Deterministic vectors from a text's hash (no model)."""

    key = "hash@0"
    dimension = 8

    def encode(self, texts) -> np.ndarray:
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8) for t in texts]
        vectors = np.stack(rows).astype(np.float32) - 127.5 if rows else np.zeros((0, 8), np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(1e-6)


# ---- generated cases ------------------------------------------------------------------------------------

# "./ a.md", "A/B >" and ["C#", " "] normalise to values that would change if normalised again
PATHS = ["a.md", "notes/b.md", "./notes/b.md", "notes\\c.md", "x/a.md", "./ a.md", " a.md"]
HEADINGS = [
    "",
    "Sec 1",
    "Sec 10",
    "Sec 1 > Part 2",
    "Sec 1 > Part 2 > Deep",
    "Café",
    "Cafe\u0301 > Menu",
    " Sec  1 ",
    "A/B",
    "A/B >",
    "A > B",
]
TEXTS = [
    "",
    "We run Postgres 16 on RDS.",
    "WE RUN   postgres 16",
    "Le café est ouvert.",
    "Le cafe\u0301 est ouvert.",
    "Straße und Maße",
    "nothing relevant",
]
SNIPPETS = ["postgres 16", "café", "STRASSE", " ", "", "ouvert"]
ANSWERS = [
    "",
    "   ",
    "I don't know.",
    "I don\u2019t know",
    "Unknown",
    "Postgres 16 [1].",
    "See notes/b.md and [[c]].",
    "Per x/a.md and c.md, also b.md.",
    "From ./notes/c.md only.",
    "Do you mean Atlas or Beacon?",
    "Ça dépend: café.",
    "It runs Postgres 16.",
    "n/a",
]

anchor = st.fixed_dictionaries(
    {
        "rel_path": st.sampled_from(PATHS),
        "heading_path": st.one_of(
            st.sampled_from(HEADINGS),
            st.lists(st.sampled_from(["Sec 1", "Part 2", "Café", " x ", "A/B", "C#", " "]), max_size=3),
        ),
    }
)
binary = st.sampled_from([None, 0, 1])
mostly_given = st.sampled_from([None, 0, 1, 1])
# chunk labels: specific anchors, or a whole note (so that every top-K chunk can carry labels)
label_anchor = st.one_of(anchor, st.builds(lambda p: {"rel_path": p, "heading_path": ""}, st.sampled_from(PATHS)))


@st.composite
def golden_case(draw: st.DrawFn, cid: str) -> dict:
    supports = draw(
        st.lists(
            st.builds(
                lambda a, s, r, d: {**a, "snippets": s, "required": r, **({"date": d} if d else {})},
                anchor,
                st.lists(st.sampled_from(SNIPPETS), max_size=2),
                st.booleans(),
                st.sampled_from([None, "2025-01-10", "2025-04-02"]),
            ),
            max_size=4,
        )
    )
    n = len(supports)
    groups = draw(st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=2), max_size=2)) if n else []
    labels = {
        "chunks": draw(
            st.lists(
                st.builds(
                    lambda a, t, s, m: {**a, "topically_relevant": t, "evidence_sufficient": s, "misleading": m},
                    label_anchor,
                    mostly_given,
                    mostly_given,
                    mostly_given,
                ),
                max_size=5,
            )
        ),
        "answers": draw(
            st.lists(st.builds(_answer_label, st.sampled_from([None, "m1", "m2"]), binary, binary), max_size=2)
        ),
    }
    case = {"id": cid, "question": "What?", "gold_supports": supports, "required_support_groups": groups}
    case["answerable"] = draw(st.booleans())
    case["recency_conflict_rule"] = draw(st.sampled_from([None, "cite_newer", "cite_both", "acknowledge_both"]))
    case["expected_action"] = draw(st.sampled_from([None, "answer", "refuse", "clarify"]))
    if draw(st.booleans()):
        case["labels"] = labels
    return {k: v for k, v in case.items() if v is not None}


def _answer_label(method: str | None, cited: int | None, helpful: int | None) -> dict:
    label = {"source_cited": cited, "helpful": helpful, "acknowledges_conflict": helpful}
    return {**label, **({"method": method} if method else {})}


@st.composite
def capture(draw: st.DrawFn, cid: str) -> dict:
    ranks = draw(st.lists(st.integers(1, 14), unique=True, max_size=12))
    retrieved = [
        {**draw(anchor), "rank": r, "text": draw(st.sampled_from(TEXTS)), "score": draw(st.sampled_from([None, 0.5]))}
        for r in ranks
    ]
    return {
        "case_id": cid,
        "method": draw(st.sampled_from([None, "m1"])),
        "answer": draw(st.sampled_from(ANSWERS)),
        "abstained": draw(st.sampled_from([None, True, False])),
        "status": draw(st.sampled_from(["ok", "ok", "ok", "error", "timeout", "empty"])),
        "references": draw(st.lists(anchor, max_size=2)),
        "retrieved": retrieved,
        "folder_mode": draw(st.sampled_from([None, "off", "on", "on_with_fallback"])),
        "selected_folders": draw(st.lists(st.sampled_from(["notes", "x", "", "a.md"]), max_size=2)),
    }


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[dict], list[dict]]:
    n = draw(st.integers(1, 5))
    cases = [draw(golden_case(f"c{i}")) for i in range(n)]
    captures = [draw(capture(f"c{i}")) for i in range(n)]
    for case, cap in zip(cases, captures):  # some answer labels name this very answer
        for label in case.get("labels", {}).get("answers", []):
            if draw(st.booleans()):
                label["answer_sha256"] = hashlib.sha256(cap["answer"].strip().encode()).hexdigest()[
                    : draw(st.sampled_from([8, 64]))
                ]
    return cases, captures


def _models(cases: list[dict], captures: list[dict]) -> list[tuple[GoldenCase, Capture]]:
    try:
        return [(GoldenCase.model_validate(c), Capture.model_validate(x)) for c, x in zip(cases, captures)]
    except ValidationError:
        assume(False)
        raise


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches(), st.integers(1, 12), st.booleans(), st.sampled_from([frozenset(), frozenset({"notes/c.md", "z/c.md"})])
)
def test_generated_cases_score_identically(data, k: int, require_snippets: bool, known_docs: frozenset) -> None:
    cases, captures = data
    pairs = _models(cases, captures)
    config = ScoringConfig(k=k, require_snippets=require_snippets)
    expected = score_batch(pairs, DETERMINISTIC, config, known_docs=known_docs).tables()
    with tempfile.TemporaryDirectory() as folder:
        raw_cases = _write(Path(folder) / "raw_cases.jsonl", [json.dumps(c, ensure_ascii=False) for c in cases])
        raw_captures = _write(Path(folder) / "raw_captures.jsonl", [json.dumps(x) for x in captures])
        ours = score_files(raw_cases, raw_captures, DETERMINISTIC, config, known_docs=known_docs).tables()
        assert_same_tables(ours, expected)
        dumped = score_columnar(ColumnarBatch.from_models(pairs), DETERMINISTIC, config, known_docs=known_docs)
        assert_same_tables(dumped.tables(), expected)
