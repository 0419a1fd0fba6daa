"""The bundled sample: its provenance (the capture plan rebuilds the files byte for byte) and the
coverage the backbone issue asks of it."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

from raglake.golden import load_golden
from raglake.lake.store import Lake
from raglake.pipeline.plan import SAMPLE_CAPTURES, SAMPLE_GOLDEN
from raglake.schemas import CATEGORIES, DIFFICULTIES, RECENCY_RULES
from raglake.targets import make_target
from tests.conftest import ROOT


def test_captures_and_label_hashes_are_what_the_plan_builds() -> None:
    done = subprocess.run(
        [sys.executable, "data/tools/build_sample_captures.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "up to date" in done.stdout, done.stdout + done.stderr


def test_golden_set_covers_what_the_sample_promises() -> None:
    golden = load_golden(ROOT / SAMPLE_GOLDEN)
    cases = golden.cases
    assert len(cases) >= 60
    assert set(Counter(c.category for c in cases)) == set(CATEGORIES)
    assert set(c.difficulty for c in cases) == set(DIFFICULTIES)
    assert {c.recency_conflict_rule for c in cases} - {None} == set(RECENCY_RULES)
    assert sum(not c.answerable for c in cases) >= 8
    assert sum(bool(c.labels and (c.labels.chunks or c.labels.answers)) for c in cases) >= 15
    assert all(c.required_support_groups for c in cases if c.category == "multi_hop")
    assert {c.vault for c in cases} == {"work", "personal"} and all(c.tags for c in cases)
    corpus = ROOT / "data" / "corpus"
    notes = [p for p in corpus.rglob("*.md") if p.stat().st_size > 500]
    assert len(notes) >= 25 and {p.relative_to(corpus).parts[0] for p in notes} == {"work", "personal"}
    for case in cases:
        for support in case.gold_supports:
            assert (corpus / support.rel_path).is_file(), (case.id, support.rel_path)


def test_both_sample_captures_validate_and_differ_as_documented(tmp_path) -> None:
    golden = load_golden(ROOT / SAMPLE_GOLDEN)
    by_method = {}
    for spec in SAMPLE_CAPTURES:
        target = make_target(spec, Lake(str(tmp_path / "lake")))
        target.check(golden)
        by_method[target.name] = {c.case_id: c for c in target.capture(golden.cases)}
    basic, local = by_method["basic_search"], by_method["local_search"]
    assert sum(c.status == "error" for c in basic.values()) == 1 == sum(c.status == "error" for c in local.values())
    assert any(c.status == "empty" for c in basic.values())
    assert any(c.folder_mode == "on" for c in local.values()) and all(c.folder_mode == "off" for c in basic.values())
    answerable = {c.id for c in golden.cases if c.answerable}
    assert any(c.abstained for cid, c in local.items() if cid in answerable)
