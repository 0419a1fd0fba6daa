"""`raglake metrics --markdown` (issue 26: the docs table applies to a user's metrics as to built-in ones):
without an eval file or `--plugin` it prints exactly docs/metric-table.md (the project's own docs); when an
eval file (raglake.yaml in the working folder, or -c FILE) or --plugin names metrics of one's own, it prints
that table, then "Your metrics": the same columns plus origin and source, one row per plugin metric, rubric
and assertion, paths shown relative to the working folder."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raglake.metrics import plugins, registry
from tests.conftest import ROOT

DOCS_TABLE = (ROOT / "docs" / "metric-table.md").read_text(encoding="utf-8").strip()
COLUMNS = (
    "| metric | family | level | version | scale | scale view | better | applies to | seed | same as | rule "
    "| origin | source |"
)
CHECKS = '''
import raglake


@raglake.metric("short_answer", version="2", inputs=("answer",))
def short_answer(case):
    """1 when the answer fits | a text message."""
    return len(case.answer) <= 160
'''


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(plugins, "_FILES", {})
    monkeypatch.setattr(plugins, "_MODULES", {})


def _markdown(*args: str) -> str:
    """The command's output, as a fresh process gives it (the registry of the built-in metrics only)."""
    from raglake.cli import app

    registry._REGISTRY = {name: m for name, m in registry._REGISTRY.items() if m.builtin}
    plugins._FILES.clear()
    plugins._MODULES.clear()
    result = CliRunner().invoke(app, ["metrics", "--markdown", *args], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def _own(text: str) -> list[str]:
    """The rows of the "Your metrics" table."""
    part = text.split("## Your metrics", 1)[1]
    return [line for line in part.splitlines() if line.startswith("| `")]


def test_without_an_eval_file_or_plugin_it_prints_the_docs_table(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert not (ROOT / "raglake.yaml").exists()
    assert _markdown().strip() == DOCS_TABLE


def test_an_eval_files_metrics_follow_the_builtin_table(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "checks" / "own.py").parent.mkdir()
    (tmp_path / "checks" / "own.py").write_text(CHECKS, encoding="utf-8")
    (tmp_path / "raglake.yaml").write_text(
        textwrap.dedent(
            """
            golden: golden.jsonl
            targets: ["replay:captures.jsonl"]
            plugins: [checks/own.py]
            rubrics:
              polite_tone: {criteria: "Is the answer courteous?", inputs: [answer], scale: [1, 5]}
            assertions:
              cites_pn: {type: regex, pattern: "PN-[0-9]{4}|ADR-[0-9]+"}
            """
        ).lstrip(),
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    text = _markdown()
    builtin, own = text.split("\n## Your metrics", 1)
    assert builtin.strip() == DOCS_TABLE  # the built-in table as the docs hold it, then the user's
    assert COLUMNS in own
    rows = {row.split(" | ")[0].strip("| `"): row for row in _own(text)}
    assert sorted(rows) == ["cites_pn", "polite_tone", "short_answer"]
    short = rows["short_answer"]
    assert short.startswith("| `short_answer` | custom | case | 2+")  # the version: with the code's hash
    # a `|` in a description is escaped: the row keeps its 13 cells
    assert r"1 when the answer fits \| a text message. | plugin | checks/own.py:5 |" in short
    assert rows["cites_pn"].endswith(" | assertion | raglake.yaml: assertions.cites_pn |")
    assert r"PN-[0-9]{4}\|ADR-[0-9]+" in rows["cites_pn"]
    assert " | rubric | " in rows["polite_tone"] and str(tmp_path) not in text  # paths relative to the folder
    for row in rows.values():
        assert len(row.replace(r"\|", "").split("|")) == 15  # 13 cells between 14 bars
    # -c names another eval file; --plugin alone names a file of metrics
    monkeypatch.chdir(ROOT)
    assert sorted(r.split(" | ")[0] for r in _own(_markdown("-c", str(tmp_path / "raglake.yaml")))) == [
        "| `cites_pn`",
        "| `polite_tone`",
        "| `short_answer`",
    ]
    monkeypatch.chdir(tmp_path / "checks")
    (tmp_path / "checks" / "raglake.yaml").write_text("golden: g.jsonl\n", encoding="utf-8")  # names none
    assert _markdown().strip() == DOCS_TABLE
    assert [r.split(" | ")[0] for r in _own(_markdown("--plugin", "own.py"))] == ["| `short_answer`"]
