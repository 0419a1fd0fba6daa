"""What the golden file decides for the targets: the target a run takes when it names none (a file of another
tool's answers is its own replay target), and the notes said before a run about what the user gave that its
targets leave unused or what the default chose (`Evaluation.notes`: a `note:` line from `raglake run` and
`raglake config check`, a UserWarning from `raglake.evaluate`, a warning in the deployment flow's log)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raglake.errors import ConfigError
from raglake.golden import ANSWERS, CONTEXTS, what_it_holds
from raglake.importers import ALIASES
from raglake.pipeline.settings import DEFAULT_TARGET, SAMPLE_GOLDEN

_NAME_A_TARGET = "--target, target= or the eval file's targets:, e.g. 'http:my_service.yaml' or 'replay:captures.jsonl'"


def default_target(golden: str | None) -> str:
    """The target of a run that names none: a golden file holding another tool's answers is its own replay target
    (its answers are what is evaluated, never dropped for the builtin RAG's); contexts without any answer are an
    error saying how to give either; otherwise the builtin RAG over the sample corpus."""
    held = what_it_holds(golden) if golden else None
    if held == ANSWERS:
        return f"replay:{golden}"
    if held == CONTEXTS:
        raise ConfigError(
            f"{golden}: holds retrieved contexts but no answer (no {' or '.join(map(repr, ALIASES['answer']))} "
            f"field): add the answers your system gave, or name a system to answer the questions ({_NAME_A_TARGET})"
        )
    return DEFAULT_TARGET


def golden_notes(golden: str | None, named: list[Any] | None) -> list[str]:
    """What to say before the runs: a golden file's answers or contexts that the named targets leave unused (unless
    one of them replays the file itself), or, with no target named, that the builtin RAG over the bundled sample
    corpus answers a golden set of the user's own."""
    if not golden or not Path(golden).is_file():
        return []  # the bundled sample by default; a missing file is the plan's error
    held = what_it_holds(golden)
    if not named:
        if held in (ANSWERS, CONTEXTS) or _same_file(golden, SAMPLE_GOLDEN):
            return []
        return [
            f"no target named: the builtin RAG over the bundled sample corpus answers the questions of {golden}; "
            f"name your own system to evaluate it ({_NAME_A_TARGET})"
        ]
    if held not in (ANSWERS, CONTEXTS):
        return []
    if any(_replays(spec, golden) for spec in named):
        return []
    if held == ANSWERS:
        return [
            f"{golden} holds answers of its own; they are not evaluated: the named target(s) answer its questions "
            f"(leave the target out to evaluate the file's answers, or add the target replay:{golden} to compare them)"
        ]
    return [
        f"{golden} holds retrieved contexts of its own; they are not evaluated: the named target(s) retrieve and "
        f"answer its questions (add the answers your system gave, and leave the target out, to evaluate the file's)"
    ]


def _same_file(a: str, b: str) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def _replays(spec: Any, golden: str) -> bool:
    kind, _, arg = str(spec).partition(":")
    return kind == "replay" and bool(arg) and _same_file(arg.split("?", 1)[0], golden)
