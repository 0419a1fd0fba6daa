"""Every built-in case-level metric of the registry obeys the catalogue's conventions (METRICS.md, preamble;
the checks live in raglake.metrics.conformance, which `raglake metrics --check` runs on a user's metrics):
a Score, a known status, ok → a finite number on the metric's scale, anything else → NaN and a
reason; deterministic; complete metadata. And every metric named in §2 and §3 is registered."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import pytest

from raglake.embed.encoders import default_encoder
from raglake.metrics.conformance import CONFIGS, check_metric, varied_pairs
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric, Score, all_metrics
from raglake.pipeline.embedding import prepare_embeddings
from raglake.pipeline.scoring import score_context
from raglake.schemas import Capture, GoldenCase
from tests.judgekit import judge_outcomes

ROOT = Path(__file__).resolve().parents[1]

CASE_METRICS = all_metrics(level="case")
BUILTIN = [m for m in CASE_METRICS if m.builtin]
_PAIRS = {case.id: (case, capture) for case, capture in varied_pairs()}


@functools.lru_cache(maxsize=None)
def _prepared(case_id: str, config_index: int):
    """Vectors, BERTScores and scripted-judge outcomes of one pair, for every metric at once."""
    case, capture = _PAIRS[case_id]
    config = CONFIGS[config_index]
    embeddings = prepare_embeddings([(case, capture)], BUILTIN, config, default_encoder())
    judge = judge_outcomes([(case, capture)], BUILTIN, config, encoder=default_encoder())[case.id]
    return embeddings, judge


def _context(case: GoldenCase, capture: Capture, config: ScoringConfig) -> CaseContext:
    """Embedding metrics read the batch's vectors and BERTScores (the real packaged model); judge metrics the
    outcomes of a scripted judge run through the real steps."""
    embeddings, judge = _prepared(case.id, CONFIGS.index(config))
    return CaseContext(case, capture, config, embeddings=embeddings, judge=judge)


def _score(ctx: CaseContext, metric: Metric) -> Score:
    return score_context(ctx, [metric])[0][1]


def test_registry_has_case_metrics():
    assert len(BUILTIN) >= 24


@pytest.mark.parametrize("metric", BUILTIN, ids=[m.name for m in BUILTIN])
def test_case_metric_conformance(metric):
    """raglake.metrics.conformance.check_metric (what `raglake metrics --check` runs on a user's metrics):
    metadata; on every varied case under three configs a Score of a known status, ok -> a finite value on
    the scale, else NaN and a reason, a failed capture -> undefined (capture_failed), the same score twice;
    both the defined and the undefined path taken."""
    found = check_metric(metric, _score, context=_context)
    assert found.problems == []
    assert "ok" in found.statuses and found.statuses - {"ok"}


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
