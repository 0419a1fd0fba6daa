"""The layers point one way (pyproject.toml's import-linter contracts, run by `make test` through
tools/lint_imports.py): a planted forbidden import breaks the suite, and no function-level import of a
raglake module hides a dependency from the contracts' readers (issue 11)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [sys.executable, str(ROOT / "tools" / "lint_imports.py")]
# deferred on purpose, not to dodge a cycle: the read-only commands must not load Prefect (issue 10), and
# no command but `raglake report` and `raglake view` loads matplotlib and jinja2, none but `serve-demo` FastAPI
# and `view` Starlette (~0.6 s of every command's start); each is the command line (the top layer) importing a
# layer below it. The embedder
# imports its torch-only model (raglake.embed.torchbert: torch, 1.7 s) when a model loads, as it imports
# sentence-transformers: nothing that never embeds may pay for torch. The Python API imports its flows
# (raglake.api.flowrun) once it has launched Prefect's temporary server, which starts meanwhile; both import
# Prefect and its flows (raglake.flows.orchestrated) only for a run that needs them: a run in this process
# never loads Prefect (issue 29: ~1.1 s of a cold start). `raglake.evaluate` (raglake.api.run) starts the packaged
# model's process before it imports the API's work (raglake.api.evaluation, ~0.9 s), which then runs beside it;
# the `raglake` command (raglake.command) likewise, before it imports the command line (raglake.cli, ~0.7 s)
ALLOWED_DEFERRED = {
    ("raglake/command.py", "raglake.cli"),
    ("raglake/embed/model.py", "raglake.embed.torchbert"),
    ("raglake/cli/jobs.py", "raglake.cli.flowrun"),
    ("raglake/api/run.py", "raglake.api.evaluation"),
    ("raglake/api/evaluation.py", "raglake.api.flowrun"),
    ("raglake/api/flowrun.py", "raglake.flows.orchestrated"),
    ("raglake/cli/flowrun.py", "raglake.flows.orchestrated"),
    ("raglake/cli/metaeval.py", "raglake.cli.flowrun"),
    ("raglake/cli/report.py", "raglake.report.html"),
    ("raglake/cli/tools.py", "raglake.demo.app.Faults"),
    ("raglake/cli/tools.py", "raglake.demo.app.create_app"),
    ("raglake/cli/view.py", "raglake.view.web"),
}


def _lint(*plants: str) -> subprocess.CompletedProcess[str]:
    args = [a for p in plants for a in ("--plant", p)]
    return subprocess.run([*LINT, *args], capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.parametrize(
    "plant, contract",
    [
        ("raglake/lake/store.py:from raglake.metrics import registry", "never imports metrics"),
        ("raglake/metrics/retrieval.py:import raglake.judge.gateway", "layers point one way"),
        ("raglake/pipeline/scoring.py:import prefect", "nothing imports Prefect"),
    ],
)
def test_a_planted_forbidden_import_breaks_a_contract(plant: str, contract: str) -> None:
    result = _lint(plant)
    assert result.returncode != 0, result.stdout[-2000:]
    broken = result.stdout[result.stdout.index("Contracts") :]
    assert contract in broken and "BROKEN" in broken


def _deferred_imports(path: Path) -> list[tuple[int, str]]:
    """Imports of raglake modules inside a function body."""
    found = []
    for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "raglake":
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "raglake"]
    return found


def test_no_function_level_import_of_a_raglake_module() -> None:
    sources = [p for folder in ("raglake", "flows", "tasks") for p in sorted((ROOT / folder).rglob("*.py"))]
    offenders = [
        f"{p.relative_to(ROOT)}:{line} imports {module}"
        for p in sources
        for line, module in _deferred_imports(p)
        if (p.relative_to(ROOT).as_posix(), module) not in ALLOWED_DEFERRED
    ]
    assert not offenders, "function-level imports of raglake modules (move them to the top):\n" + "\n".join(offenders)
