"""What a re-scoring is asked to do, as one typed model (the `rescore` command's options, the `rescore` flow's
parameter, a deployment's)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from pydantic import Field, field_validator

from raglake.metrics.extensions import Extensions
from raglake.pipeline.fields import Cli
from raglake.pipeline.judge_settings import JudgeField
from raglake.pipeline.rescore import KEPT_NO_JUDGE, Decision
from raglake.pipeline.settings import DeviceName, MetricNames, RunnerSpecText, _Settings


class RescoreSettings(_Settings):
    """One re-scoring: which runs, which metrics, and the embedder and judge to use."""

    # first: its validator registers the eval file's metrics, which `metrics` may then name
    extensions: Annotated[Extensions, Cli(hidden=True)] = Field(
        default_factory=Extensions, description="the eval file's own metrics, rubrics and assertions"
    )
    run_ids: Annotated[list[str] | None, Cli(hidden=True)] = Field(None, description="run ids, prefixes or latest~N")
    since: dt.date | None = Field(None, description="runs started on or after this date (YYYY-MM-DD)")
    until: dt.date | None = Field(None, description="runs started on or before this date (YYYY-MM-DD)")
    all_runs: Annotated[bool, Cli(aliases=("--all",))] = Field(False, description="every run in the lake")
    metrics: Annotated[MetricNames, Cli(short="-m")] = Field(
        None, description="only these metrics (comma-separated; default: every metric of each run)"
    )
    lake: str | None = Field(None, description="lake root (default $RAGLAKE_LAKE or data/lake)")
    embedder: str | None = Field(None, description="embedder (default: the one each run used)")
    device: DeviceName = Field("auto", description="where the embedder runs: auto, cpu, cuda or mps")
    judge: JudgeField = Field(None, description="judge for judge metrics (without one they are kept)")
    batch_size: int | None = Field(
        None, ge=1, description="cases per scoring task (default: the run's cases / 20, between 100 and 5,000)"
    )
    dry_run: bool = Field(False, description="say what would be recomputed and what judge calls it costs")
    force: bool = Field(
        False, description="recompute every selected metric, changed or not (judge metrics only with a judge)"
    )
    runner: RunnerSpecText = Field("thread", description="where scoring batches run: thread, or dask[:ADDRESS]")

    @field_validator("since", "until", mode="before")
    @classmethod
    def _date(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value)
            except ValueError:
                raise ValueError(f"takes a date as YYYY-MM-DD, got {value!r}") from None
        return value

    @field_validator("extensions")
    @classmethod
    def _activated(cls, value: Extensions) -> Extensions:
        value.activate()  # the user's metrics are recomputed from their current code, as built-ins are
        return value

    def decide(self, decisions: list[Decision]) -> list[Decision]:
        """The decisions with --force applied: everything recomputed, but judge metrics without a judge
        (recomputing them would only replace their values by `skipped`)."""
        if not self.force:
            return decisions
        return [
            d if d.compute or d.reason == KEPT_NO_JUDGE else Decision(d.run_id, d.metric, True, "forced")
            for d in decisions
        ]
