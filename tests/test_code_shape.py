"""Small modules by concept and short functions (issue 11's "Done when"): no shipped module over 400
lines, no function over 60 lines (decorators included) in raglake/, flows/ or tasks/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [p for folder in ("raglake", "flows", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))]


def test_no_module_over_400_lines() -> None:
    long = [f"{p.relative_to(ROOT)} ({n} lines)" for p in SOURCES if (n := len(p.read_text().splitlines())) > 400]
    assert not long, "split these modules by concept: " + ", ".join(long)


def test_no_function_over_60_lines() -> None:
    long = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if (n := node.end_lineno - start + 1) > 60:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these functions: " + ", ".join(long)
