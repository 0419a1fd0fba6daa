"""The meta-evaluation's own tasks (after the shared embed → judge → score stage): agreement with the
labels, staged by reference, then landed in the lake's `metaeval` table."""

from __future__ import annotations

from collections.abc import Sequence

from raglake.metaeval.run import AgreementWork, land_agreement, stage_agreement
from raglake.pipeline.staging import ScoredRef
from raglake.tasks import engine


@engine.task(name="metaeval-agreement")
def measure_agreement(work: AgreementWork, scored: Sequence[ScoredRef]) -> str:
    """Agreement statistics with bootstrap intervals for every data set × metric; the staged rows' path."""
    return stage_agreement(work, scored)


@engine.task(name="land-metaeval")
def land_metaeval(lake_url: str, metaeval_id: str, results: str, path: str) -> int:
    """The staged rows as one file of the lake's `metaeval` table; how many rows."""
    return land_agreement(lake_url, metaeval_id, results, path)
