"""Capture a batch of cases from the target (the IO edge towards the system under test)."""

from __future__ import annotations

from prefect import task

from raglake.runplan import capture_key
from raglake.schemas import Capture, GoldenCase
from raglake.targets import Target


@task(
    name="capture-batch",
    retries=2,
    retry_delay_seconds=[2, 10],
    persist_result=True,
    cache_key_fn=lambda ctx, p: capture_key(p["target"], p["cases"]),
)
def capture_batch(target: Target, cases: list[GoldenCase]) -> list[Capture]:
    return target.capture(cases)
