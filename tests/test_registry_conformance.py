"""Every case-level metric of the registry obeys the catalogue's conventions (METRICS.md, preamble):
a Score, a known status, ok → a finite number on the metric's scale, anything else → NaN and a
reason; deterministic; complete metadata. And every metric named in §2 and §3 is registered."""

from __future__ import annotations

import functools
import hashlib
import math
import os
import re
from pathlib import Path

import pytest

from raglake.embed.encoders import default_encoder
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import FAMILIES, STATUSES, Score, all_metrics
from raglake.pipeline.embedding import prepare_embeddings
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from tests.judgekit import judge_outcomes

ROOT = Path(__file__).resolve().parents[1]

ATLAS = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database"}
ATLAS_SUB = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database > Version"}
BILLING = {"rel_path": "work/billing.md", "heading_path": "Billing > Status"}
OTHER = {"rel_path": "work/other.md", "heading_path": "Other"}
JAN = {"rel_path": "work/meetings/jan.md", "heading_path": "January sync > Launch", "date": "2025-01-10"}
APR = {"rel_path": "work/meetings/apr.md", "heading_path": "April retro > Launch", "date": "2025-04-02"}


def _anchor(d: dict) -> dict:
    return {k: v for k, v in d.items() if k in ("rel_path", "heading_path")}


def _case(id_: str, **kw) -> GoldenCase:
    return GoldenCase.model_validate({"id": id_, "question": "What?", **kw})


def _cap(id_: str, *chunks: dict, **kw) -> Capture:
    data = {
        "case_id": id_,
        "method": "m1",
        "answer": "Atlas uses Postgres 16 [1].",
        "retrieved": [dict(rank=i, text="We run Postgres 16.", **_anchor(c)) for i, c in enumerate(chunks, 1)],
    }
    data.update(kw)
    return Capture.model_validate(data)


def _pairs() -> list[tuple[GoldenCase, Capture]]:
    answerable = dict(
        gold_supports=[dict(ATLAS, snippets=["postgres 16"], required=True), BILLING],
        required_support_groups=[[0], [1]],
    )
    labels = {
        "chunks": [
            dict(ATLAS, topically_relevant=1, evidence_sufficient=1, misleading=0),
            dict(OTHER, topically_relevant=0, evidence_sufficient=0, misleading=1),
            dict(BILLING, topically_relevant=1, evidence_sufficient=0, misleading=0),
        ],
        "answers": [
            {
                "method": "m1",
                "answer_sha256": hashlib.sha256(b"Atlas uses Postgres 16 [1].").hexdigest()[:12],
                "support_present": 1,
                "unsupported_claim_present": 0,
                "contradicted_claim_present": 0,
                "source_cited": 1,
                "fabricated_source": 0,
                "proper_action": 1,
                "response_on_topic": 1,
                "helpful": 1,
                "incomplete": 0,
                "unsafe_content": 0,
                "acknowledges_conflict": 1,
            }
        ],
    }
    dated = [JAN, APR]
    return [
        # answerable, hits, references
        (_case("a1", **answerable), _cap("a1", OTHER, ATLAS_SUB, BILLING, references=[_anchor(ATLAS)])),
        # answerable, misses, fabricated reference
        (_case("a2", **answerable), _cap("a2", OTHER, OTHER, references=[{"rel_path": "ghost.md"}])),
        # answerable, no chunks
        (_case("a3", **answerable, reference_answer="Atlas runs on Postgres 16."), _cap("a3", answer="Postgres.")),
        # answerable, no gold supports
        (_case("a4"), _cap("a4", OTHER)),
        # unanswerable: abstained (field), answered (phrase-free), abstained (phrase)
        (_case("u1", answerable=False), _cap("u1", answer="I could not find this.", abstained=True)),
        (
            _case("u2", answerable=False, reference_answer="The notes do not say."),
            _cap("u2", OTHER, answer="Your password is hunter2."),
        ),
        (_case("u3", answerable=False), _cap("u3", answer="I don't know.")),
        # failed captures
        (_case("f1", **answerable), _cap("f1", status="error", error="HTTP 502", answer="")),
        (_case("f2", answerable=False), _cap("f2", status="timeout", error="deadline", answer="")),
        # empty answer
        (_case("e1", **answerable), _cap("e1", ATLAS, answer="  ")),
        # labelled: fully, and with an unlabelled rank, and all-irrelevant labels without supports
        (_case("l1", **answerable, labels=labels), _cap("l1", ATLAS, OTHER, BILLING)),
        (_case("l2", **answerable, labels=labels), _cap("l2", ATLAS, {"rel_path": "x.md"}, BILLING)),
        (
            _case("l3", labels={"chunks": [dict(OTHER, topically_relevant=0, evidence_sufficient=0, misleading=0)]}),
            _cap("l3", OTHER, OTHER),
        ),
        # recency rules
        (
            _case("r1", gold_supports=dated, recency_conflict_rule="cite_newer"),
            _cap("r1", _anchor(APR), references=[_anchor(APR)]),
        ),
        (_case("r2", gold_supports=dated, recency_conflict_rule="cite_both"), _cap("r2", references=[_anchor(JAN)])),
        (
            _case("r3", gold_supports=dated, recency_conflict_rule="acknowledge_both"),
            _cap("r3", references=[_anchor(JAN), _anchor(APR)]),
        ),
        (
            _case("r4", gold_supports=dated, recency_conflict_rule="acknowledge_both", labels=labels),
            _cap("r4", references=[_anchor(JAN), _anchor(APR)]),
        ),
        # folder mode on / with fallback / off
        (_case("s1", **answerable), _cap("s1", ATLAS, folder_mode="on", selected_folders=["work"])),
        (_case("s2", **answerable), _cap("s2", ATLAS, folder_mode="on_with_fallback", selected_folders=["personal"])),
        (_case("s3", **answerable), _cap("s3", ATLAS, folder_mode="off")),
        # a clarification request
        (_case("q1", expected_action="clarify"), _cap("q1", answer="Do you mean Atlas the project or the library?")),
    ]


CONFIGS = [ScoringConfig(k=1), ScoringConfig(k=3, require_snippets=True), ScoringConfig(k=5)]
CASE_METRICS = all_metrics(level="case")


def _range(scale: str) -> tuple[float, float]:
    if scale == "binary":
        return 0.0, 1.0
    if scale == "cosine":
        return -1.0, 1.0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)", scale)
    assert m, f"unknown scale {scale!r}"
    return float(m.group(1)), float(m.group(2))


def _same(a: Score, b: Score) -> bool:
    values = (math.isnan(a.value) and math.isnan(b.value)) or a.value == b.value
    return values and (a.status, a.reason, a.source) == (b.status, b.reason, b.source)


_PAIRS = {case.id: (case, capture) for case, capture in _pairs()}


@functools.lru_cache(maxsize=None)
def _prepared(case_id: str, config_index: int):
    """Vectors, BERTScores and scripted-judge outcomes of one pair, for every metric at once."""
    case, capture = _PAIRS[case_id]
    config = CONFIGS[config_index]
    embeddings = prepare_embeddings([(case, capture)], CASE_METRICS, config, default_encoder())
    judge = judge_outcomes([(case, capture)], CASE_METRICS, config, encoder=default_encoder())[case.id]
    return embeddings, judge


def test_registry_has_case_metrics():
    assert len(CASE_METRICS) >= 24


@pytest.mark.parametrize("metric", CASE_METRICS, ids=[m.name for m in CASE_METRICS])
def test_case_metric_conformance(metric):
    # metadata
    assert metric.family in FAMILIES
    assert metric.version and str(metric.version).strip()
    assert metric.description and metric.description.strip()
    # a direction for every metric, except a class share that is neither good nor bad in itself
    assert metric.higher_is_better is not None or metric.name == "answer_class_dont_know"
    assert metric.level == "case"
    lo, hi = _range(metric.scale)

    statuses = set()
    for config in CONFIGS:
        for case, capture in _pairs():
            where = f"{metric.name} on {case.id} (k={config.k})"
            # embedding metrics read the batch's vectors and BERTScores (the real packaged model); judge
            # metrics the outcomes of a scripted judge run through the real steps
            embeddings, judge = _prepared(case.id, CONFIGS.index(config))
            s = score_context(CaseContext(case, capture, config, embeddings=embeddings, judge=judge), [metric])[0][1]
            assert isinstance(s, Score), where
            assert s.status in STATUSES, where
            statuses.add(s.status)
            if s.status == "ok":
                assert isinstance(s.value, float), where
                assert math.isfinite(s.value), where
                assert lo <= s.value <= hi, (where, s.value)
                if metric.scale == "binary":
                    assert s.value in (0.0, 1.0), (where, s.value)
            else:
                assert math.isnan(s.value), (where, s)
                assert isinstance(s.reason, str) and s.reason.strip(), (where, s)
            if capture.failed:
                assert (s.status, s.reason) == ("undefined", "capture_failed"), where
            # deterministic: a fresh context on the same input gives the same score
            again = score_context(CaseContext(case, capture, config, embeddings=embeddings, judge=judge), [metric])[0][
                1
            ]
            assert _same(s, again), (where, s, again)
    # the varied set exercises both the defined and the undefined path of every metric
    assert "ok" in statuses
    assert statuses - {"ok"}


# ---- every metric named in METRICS.md §2 and §3 is registered ----------------------------------


def _metrics_md() -> Path | None:
    candidates = [os.environ.get("RAGLAKE_METRICS_MD")] if os.environ.get("RAGLAKE_METRICS_MD") else []
    # the shared spec when this checkout sits beside it; else the vendored copy in docs/
    candidates += [ROOT.parent / "shared" / "METRICS.md", ROOT / "docs" / "METRICS.md"]
    return next((Path(p) for p in candidates if Path(p).is_file()), None)


def _section(text: str, number: int) -> str:
    m = re.search(rf"^## {number}\..*?(?=^## |\Z)", text, flags=re.M | re.S)
    assert m, f"no section {number} in METRICS.md"
    return m.group(0)


def _first_column_names(section: str) -> list[str]:
    names = []
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        if not first or set(first) <= set("-: ") or first == "name":
            continue
        for part in first.split(","):
            part = part.strip()
            if re.fullmatch(r"[a-z][a-z0-9_]*", part):  # plain snake_case names, no backticks
                names.append(part)
    return names


def test_every_catalogue_metric_of_sections_2_and_3_is_registered():
    path = _metrics_md()
    assert path is not None, "METRICS.md not found (docs/METRICS.md is vendored; set RAGLAKE_METRICS_MD)"
    text = path.read_text(encoding="utf-8")
    names = _first_column_names(_section(text, 2)) + _first_column_names(_section(text, 3))
    # the parser found the tables: 8 retrieval names, 16 label names
    assert len(names) >= 24, names
    assert {"recall_any_at_k", "ndcg_at_k", "conditional_fabrication_rate", "unsafe_content_rate"} <= set(names)
    registered = {m.name for m in all_metrics()}
    missing = sorted(set(names) - registered)
    assert not missing, f"named in METRICS.md but not registered: {missing}"
    case_level = {m.name for m in CASE_METRICS}
    assert set(names) <= case_level


def test_vendored_metrics_catalogue_matches_the_shared_one():
    shared, vendored = ROOT.parent / "shared" / "METRICS.md", ROOT / "docs" / "METRICS.md"
    assert vendored.is_file()
    if shared.is_file():
        assert vendored.read_text(encoding="utf-8") == shared.read_text(encoding="utf-8"), "re-copy docs/METRICS.md"
