"""What every target is: something that turns golden cases into captures."""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

from raglake.golden import GoldenSet
from raglake.schemas import Capture, GoldenCase


@runtime_checkable
class Target(Protocol):
    spec: str  # as the user wrote it, e.g. "replay:data/captures/basic_search.jsonl"
    kind: str  # replay, replay-run, builtin, http
    name: str  # short label for tables: the method, or the file stem
    deterministic: bool  # the same cases always give the same captures (replay, builtin); not a live service

    def content_key(self) -> str:
        """Changes whenever the captures this target would return may change (part of cache keys)."""
        ...

    def check(self, golden: GoldenSet) -> None:
        """Raise on anything wrong with the target for this golden set, before any work is done."""
        ...

    def capture(self, cases: list[GoldenCase], journal: Any = None) -> list[Capture]:
        """One capture per case, in order; a failed capture is a Capture with status error/timeout.
        A live target appends each capture to `journal` (raglake.targets.journal.CaptureJournal) and
        does not ask again for cases already in it."""
        ...

    def known_docs(self) -> frozenset[str]:
        """Documents of the target's index manifest (empty when the target has none)."""
        ...

    def manifest(self) -> Any:
        """The target's index manifest (raglake.builtin.index.IndexManifest), or None."""
        ...


def safe_name(text: str) -> str:
    """A label usable inside a run id and a partition path."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-")
    return cleaned[:40] or "target"
