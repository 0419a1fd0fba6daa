"""The row-by-row scoring path lives in the tests as the reference it is (issue 26, item 5): production code
(raglake/, flows/, tasks/) scores in columns and lands staged parts; it defines no per-case `score_batch`,
`score_one` or `land_scored_run` and imports nothing from tests/. What asks for the per-case path names the
production one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from raglake.errors import RaglakeError
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("raglake", "flows", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))]
REFERENCE_ONLY = {"score_batch", "score_one", "land_scored_run"}


def _offences(source: str) -> list[str]:
    """What a module does that only the tests may: define a reference-only name, or import from tests/."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in REFERENCE_ONLY:
            found.append(f"line {node.lineno}: defines {node.name}")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name) and t.id in REFERENCE_ONLY]
            found += [f"line {node.lineno}: defines {n}" for n in names]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tests" and not node.level:
            found.append(f"line {node.lineno}: imports from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name.split(".")[0] == "tests"]
    return found


@pytest.mark.parametrize(
    "planted",
    [
        "def score_batch(pairs, metrics, config):\n    pass\n",
        "class Holder:\n    def score_one(self):\n        pass\n",
        "land_scored_run = None\n",
        "from tests.rowpath import score_batch\n",
        "import tests.lakekit\n",
    ],
)
def test_the_check_sees_a_planted_offence(planted: str) -> None:
    assert _offences("import math\n" + planted)


def test_production_code_keeps_no_row_path_and_imports_nothing_from_tests() -> None:
    assert len(SOURCES) > 100  # the walk found the sources
    bad = [f"{p.relative_to(ROOT)} {o}" for p in SOURCES for o in _offences(p.read_text(encoding="utf-8"))]
    assert not bad, "the per-case path belongs to tests/rowpath.py: " + "; ".join(bad)


def _context() -> CaseContext:
    case = GoldenCase(id="c1", question="Which database?", reference_answer="Postgres.")
    chunk = {"rank": 1, "rel_path": "a.md", "text": "Postgres."}
    capture = Capture(case_id="c1", answer="Atlas uses Postgres.", retrieved=[chunk])
    return CaseContext(case, capture, ScoringConfig())  # no embeddings: not scored through the pipeline


@pytest.mark.parametrize("metric", ["semantic_similarity", "bert_score_f1"])
def test_an_embedding_metric_scored_outside_the_pipeline_names_the_production_path(metric: str) -> None:
    with pytest.raises(RaglakeError, match=r"raglake\.pipeline\.scoring\.score_columnar") as raised:
        get_metric(metric).fn(_context())
    assert "score_batch" not in str(raised.value)
