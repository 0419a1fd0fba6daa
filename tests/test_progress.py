"""Progress bars: counts and rates for captures, encoding, judge steps and scoring on a terminal;
none with --quiet, none when the output is not a terminal, and none in library use."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from raglake import progress

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=140, color_system=None), out


def test_a_stage_shows_done_total_and_a_rate() -> None:
    console, out = terminal()
    with progress.reporting(console):
        assert progress.active()
        progress.start("captures", 10, "cases")
        progress.start("captures", 5, "cases")  # a second batch of work adds to the total
        for _ in range(15):
            progress.advance("captures")
    assert not progress.active()
    text = ANSI.sub("", out.getvalue())
    assert "15/15" in text and "cases/s" in text


def test_nothing_is_shown_without_a_terminal_or_when_disabled() -> None:
    for console, enabled in ((Console(file=io.StringIO(), force_terminal=False), True), (terminal()[0], False)):
        with progress.reporting(console, enabled):
            assert not progress.active()
            progress.start("captures", 3)
            progress.advance("captures", 3)
        assert console.file.getvalue() == ""


def _run_cli(monkeypatch, tmp_path: Path, *extra: str) -> str:
    from typer.testing import CliRunner

    from raglake.cli import app, render

    console, out = terminal()
    monkeypatch.setattr(render, "console", console)
    monkeypatch.setenv("RAGLAKE_CACHE", str(tmp_path / "cache"))  # an empty vector cache: encoding happens
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--lake",
            str(tmp_path / "lake"),
            "--target",
            "replay:data/captures/basic_search.jsonl",
            "-m",
            "recall_any_at_k,context_relevance",
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return ANSI.sub("", out.getvalue())


def test_the_cli_shows_captures_encoding_and_scoring(monkeypatch, tmp_path: Path) -> None:
    text = _run_cli(monkeypatch, tmp_path)
    assert re.search(r"captures\s.*66/66\s.*cases/s", text), text[-3000:]
    assert re.search(r"scoring\s.*66/66", text)
    assert re.search(r"encoding\s.*(\d+)/\1\s.*texts/s", text), text[-3000:]


def test_quiet_turns_the_bars_off(monkeypatch, tmp_path: Path) -> None:
    text = _run_cli(monkeypatch, tmp_path, "--quiet")
    assert "66/66" not in text and "cases/s" not in text
    assert "recall_any_at_k" in text  # the summary itself still prints
