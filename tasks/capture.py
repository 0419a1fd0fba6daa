"""Capture a batch of cases from the target (the IO edge towards the system under test)."""

from __future__ import annotations

from prefect import task

from raglake import progress
from raglake.pipeline.plan import capture_key
from raglake.schemas import Capture, GoldenCase
from raglake.targets import Target
from raglake.targets.journal import CaptureJournal


@task(
    name="capture-batch",
    retries=2,
    retry_delay_seconds=[2, 10],
    persist_result=True,
    cache_key_fn=lambda ctx, p: capture_key(p["target"], p["cases"], p["run_id"]),
)
def capture_batch(target: Target, cases: list[GoldenCase], run_id: str, journal: str | None = None) -> list[Capture]:
    """A live target journals each capture, so a retry or a resumed run asks only what is missing."""
    live = journal and not target.deterministic
    captures = target.capture(cases, CaptureJournal(journal, target.content_key()) if live else None)
    if target.deterministic:  # a live target reports each case as it arrives
        progress.advance("captures", len(captures))
    return captures
