"""Land a finished run in the lake (the IO edge towards storage; retried, never cached)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prefect import task

from raglake.lake.store import Lake
from raglake.metrics.registry import RunValue
from raglake.pipeline.rows import RunRecord, land_scored_run
from raglake.pipeline.scoring import ScoredBatch
from raglake.schemas import Capture, GoldenCase


@task(name="land-run", retries=2, retry_delay_seconds=[1, 5])
def land(
    lake_url: str,
    run: RunRecord,
    cases: Sequence[GoldenCase],
    captures: Sequence[Capture],
    scored: ScoredBatch,
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> None:
    """The run's rows (raglake.pipeline.rows), committed by the lake's landing protocol."""
    land_scored_run(Lake(lake_url), run, cases, captures, scored, run_values, scoring_id, coverage)
