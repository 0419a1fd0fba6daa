"""Land a finished run in the lake (the IO edge towards storage; retried, never cached)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from raglake.lake.store import Lake
from raglake.metrics.registry import RunValue
from raglake.pipeline.rows import RunRecord, land_staged_run
from raglake.pipeline.staging import ScoredRef
from raglake.tasks import engine


@engine.task(name="land-run", retries=2, retry_delay_seconds=[1, 5])
def land(
    lake_url: str,
    run: RunRecord,
    scored: Sequence[ScoredRef],
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> None:
    """The run's staged batches committed by the lake's landing protocol (the runs row last)."""
    land_staged_run(Lake(lake_url), run, scored, run_values, scoring_id, coverage)
