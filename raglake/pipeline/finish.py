"""The Prefect-free pieces of a run that the flow strings together: gathering batch results, the
run-level figures and the `runs` row, and the headline log line."""

from __future__ import annotations

import datetime as dt
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import RunValue, all_metrics, metric_versions
from raglake.pipeline.plan import RunPlan
from raglake.pipeline.rows import RunRecord
from raglake.pipeline.staging import ScoredRef
from raglake.schemas import FAILED_STATUSES, LATENCY_STAGES, Capture


@dataclass
class JudgeSummary:
    """What the judge stage did, for the run's figures and record."""

    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: Any) -> JudgeSummary:
        stats = asdict(batch.stats)
        stats["spot_pairs"] = list(batch.spot_pairs)
        return cls(batch.outcomes, stats)

    def for_cases(self, case_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return {cid: self.outcomes.get(cid, {}) for cid in case_ids}


LatencyFacts = namedtuple("LatencyFacts", LATENCY_STAGES)  # a capture's latency_ms, as plain values


class CaptureFacts:
    """What the run-level figures read of a capture (status, latencies and cost), without the capture: a
    run of a million cases keeps these, not its captures."""

    __slots__ = ("status", "latency_ms", "cost_usd")

    def __init__(self, status: str, latency_ms: LatencyFacts, cost_usd: float | None = None):
        self.status, self.latency_ms, self.cost_usd = status, latency_ms, cost_usd

    @property
    def failed(self) -> bool:
        return self.status in FAILED_STATUSES


def capture_facts(scored: Sequence[ScoredRef]) -> list[CaptureFacts]:
    """The captures' facts of a run's scored batches, in batch order, read from their staged `cases` rows."""
    columns = ["capture_status", *(f"latency_{f}_ms" for f in LATENCY_STAGES), "cost_usd"]
    out: list[CaptureFacts] = []
    for ref in sorted(scored, key=lambda r: r.index):
        table = ref.table("cases", columns).to_pydict()
        latencies = zip(*(table[f"latency_{f}_ms"] for f in LATENCY_STAGES))
        rows = zip(table["capture_status"], latencies, table["cost_usd"])
        out.extend(CaptureFacts(s, LatencyFacts(*lat), cost) for s, lat, cost in rows)
    return out


def finish_run(
    plan: RunPlan,
    captures: Sequence[Capture | CaptureFacts],
    finished: dt.datetime,
    *,
    suite_seconds: float,
    stage_seconds: dict[str, float],
    embedding_stats: dict[str, float] | None = None,
    embedder_key: str | None = None,
    judge: JudgeSummary | None = None,
    captures_reused: int | None = None,
) -> tuple[RunRecord, list[RunValue], dict[str, list[Any]] | None]:
    """The run's `runs` row, its run-level figures and its coverage rows. `captures_reused`: how many
    cases' captures an earlier run made (a deterministic target's, reused from the staged results)."""
    manifest = plan.target.manifest()
    inputs = RunInputs(
        captures,
        suite_seconds=suite_seconds,
        stage_seconds=stage_seconds,
        manifest=manifest,
        embedding_stats=embedding_stats,
        judge_stats=judge.stats if judge else None,
        captures_reused=captures_reused,
    )
    run_level = all_metrics(level="run")
    values = [v for m in run_level for v in m.fn(inputs)]
    record = plan.record(finished, len(captures), manifest, embedder_key)
    record.metric_versions.update(metric_versions(run_level))
    coverage = manifest.coverage_columns() if manifest is not None else None
    return record, values, coverage
