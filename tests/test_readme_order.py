"""The README's first steps work in the order written, as a newcomer runs them: `make run` (the builtin
RAG), the two replayed methods, every "ask the lake" command and the report, from a scratch folder
holding the checkout's `.venv` and `data` (the lake goes to $RAGLAKE_LAKE, outside the repository).
Each command must succeed; `coverage`, written after the replay step, must still show an index
manifest (the replayed runs have none)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT
from tests.readmekit import FirstSteps, first_steps


@pytest.mark.e2e
def test_the_readme_first_steps_work_in_order(readme_first_steps: FirstSteps) -> None:
    # the steps run once per session (tests/readmekit.py); tests/test_cli.py checks the same lake further
    commands = first_steps()
    assert commands[0] == ".venv/bin/raglake run" and any(" coverage" in c for c in commands)
    assert any("replay:" in c for c in commands) and any(" report " in c for c in commands)
    assert readme_first_steps.failed is None, readme_first_steps.failed
    assert [c for c, _ in readme_first_steps.outputs] == commands  # every one ran, in order, and succeeded
    coverage = readme_first_steps.output(".venv/bin/raglake coverage")
    assert "index coverage · run" in coverage and "builtin" in coverage, coverage[:500]
    assert (readme_first_steps.folder / "report.html").stat().st_size > 10_000


def _cmake_args(text: str, pattern: str) -> list[str]:
    return re.search(pattern, text, flags=re.S).group(1).replace("\\\n", " ").split()


def test_the_readme_builds_the_local_judge_with_the_makefiles_flags() -> None:
    """One set of llama.cpp build flags: the README's by-hand command uses the Makefile's LLAMA_CMAKE_ARGS
    (a native build segfaulted here; a README with other flags rebuilt it differently)."""
    makefile = _cmake_args((ROOT / "Makefile").read_text(), r"LLAMA_CMAKE_ARGS \?= (.*?)\n(?!\s)")
    readme = _cmake_args((ROOT / "README.md").read_text(), r'CMAKE_ARGS="([^"]*)" pip install')
    assert makefile and "-DGGML_NATIVE=OFF" in makefile
    assert readme == makefile
