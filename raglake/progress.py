"""Progress of long work (captures, encoding, judge calls, scoring): counts and rates on the terminal.

The library and the flows report to whatever reporter is installed in this process; the CLI installs
a rich one (`reporting()`), tests and library users get none, and `--quiet` installs none. Worker
processes of a cluster runner have none either: their work shows as Prefect task runs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()
_reporter: RichReporter | None = None


def start(stage: str, total: int | None, unit: str = "items") -> None:
    """Begin (or extend) a stage of `total` items; a stage started again adds to its total."""
    reporter = _reporter
    if reporter is not None and (total is None or total > 0):
        reporter.start(stage, total, unit)


def active() -> bool:
    """Is a progress display installed in this process?"""
    return _reporter is not None


def advance(stage: str, n: int = 1) -> None:
    reporter = _reporter
    if reporter is not None and n:
        reporter.advance(stage, n)


class RichReporter:
    """One rich progress bar per stage, with done/total, items per second and elapsed time."""

    def __init__(self, console: Any):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class RateColumn(ProgressColumn):
            def render(self, task: Any) -> Text:
                speed = task.finished_speed or task.speed
                unit = task.fields.get("unit", "items")
                return Text(f"{speed:,.1f} {unit}/s" if speed else f"– {unit}/s", style="progress.data.speed")

        self.progress = Progress(
            TextColumn("{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def start(self, stage: str, total: int | None, unit: str) -> None:
        with _LOCK:
            if stage in self.tasks:
                task_id = self.tasks[stage]
                current = self.progress.tasks[task_id].total
                if total is not None and current is not None:
                    self.progress.update(task_id, total=current + total)
                return
            self.tasks[stage] = self.progress.add_task(stage, total=total, unit=unit)

    def advance(self, stage: str, n: int) -> None:
        with _LOCK:
            if stage not in self.tasks:
                self.tasks[stage] = self.progress.add_task(stage, total=None, unit="items")
            self.progress.advance(self.tasks[stage], n)


@contextlib.contextmanager
def reporting(console: Any, enabled: bool = True) -> Iterator[None]:
    """Show progress bars on `console` while the block runs (not when disabled or not a terminal)."""
    global _reporter
    if not enabled or not console.is_terminal:
        yield
        return
    reporter = RichReporter(console)
    with _LOCK:
        previous, _reporter = _reporter, reporter
    try:
        with reporter.progress:
            yield
    finally:
        with _LOCK:
            _reporter = previous
