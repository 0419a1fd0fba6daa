"""Capture a batch of cases from the target (the IO edge towards the system under test)."""

from __future__ import annotations

from dataclasses import replace

from raglake import progress
from raglake.pipeline.plan import capture_key
from raglake.pipeline.staging import BatchRef, stage_captures, staged_captures
from raglake.targets import Target
from raglake.targets.journal import CaptureJournal
from raglake.tasks import engine


@engine.task(name="capture-batch", retries=2, retry_delay_seconds=[2, 10])
def capture_batch(target: Target, batch: BatchRef, run_id: str, journal: str | None = None) -> BatchRef:
    """The batch with its captures staged. Captures staged earlier under the same content key (a
    deterministic target's, from any run, marked `reused`; a live one's, from this run) are reused; a
    live target journals each capture, so a retry or a resumed run asks only what is missing."""
    key = capture_key(target, batch, run_id)
    found = staged_captures(batch, key)
    if found is not None:
        progress.advance("captures", batch.n)
        # a live target's are this run's own (a retry); a replay file's latencies are recorded, never
        # measured: only a deterministic target that measures as it answers (builtin) reuses another run's
        measured = target.deterministic and not target.kind.startswith("replay")
        return replace(found, reused=True) if measured else found
    if hasattr(target, "capture_lines"):  # a replay file: its spooled lines are copied, not parsed
        progress.advance("captures", batch.n)
        return stage_captures(batch, key, target.capture_lines(batch.case_ids()))
    live = journal and not target.deterministic
    captures = target.capture(batch.read_cases(), CaptureJournal(journal, target.content_key()) if live else None)
    if target.deterministic:  # a live target reports each case as it arrives
        progress.advance("captures", len(captures))
    return stage_captures(batch, key, captures)
