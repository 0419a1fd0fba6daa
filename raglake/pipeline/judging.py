"""The judge stage's per-run state: one ledger and one budget per (lake, run) in this process, whatever the
batching. `JUDGE_RUNS` owns them: a run's first judge batch opens its session, later batches (tasks) look it
up by (lake, run id), and the flow closes it when the run ends (`close`: flushes the ledger, frees the
budget); `clear()` closes every session (the CLI calls it when a command ends)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raglake.judge.budget import Budget
from raglake.judge.config import JudgeConfig
from raglake.judge.ledger import JudgeLedger
from raglake.judge.stage import JudgedBatch, SpotSample
from raglake.judge.stage import judge_batch as run_judge_batch
from raglake.lake.calls import LakeCallStore
from raglake.lake.store import Lake
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric
from raglake.schemas import Capture, GoldenCase


@dataclass
class JudgeSession:
    """What every judge batch of one run shares: the lake's ledger (calls made once) and the budget."""

    ledger: JudgeLedger
    budget: Budget


class JudgeRuns:
    """The open judge sessions of this process, keyed by (lake url, run id)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str | None], JudgeSession] = {}

    def open(self, config: JudgeConfig, lake_url: str, run_id: str | None) -> JudgeSession:
        """The run's session: the one already open, or a new one (ledger on the lake, budget from `config`)."""
        key = (lake_url, run_id)
        with self._lock:
            if key not in self._open:
                self._open[key] = JudgeSession(
                    JudgeLedger(LakeCallStore(Lake(lake_url)), run_id), Budget(config.max_calls, config.max_cost_usd)
                )
            return self._open[key]

    def is_open(self, lake_url: str, run_id: str | None) -> bool:
        with self._lock:
            return (lake_url, run_id) in self._open

    def close(self, lake_url: str, run_id: str | None) -> None:
        """End the run's session: its ledger is flushed, its budget forgotten (a no-op when none is open)."""
        with self._lock:
            session = self._open.pop((lake_url, run_id), None)
        if session is not None:
            session.ledger.flush()

    def clear(self) -> None:
        """Close every open session."""
        with self._lock:
            keys = list(self._open)
        for lake_url, run_id in keys:
            self.close(lake_url, run_id)


JUDGE_RUNS = JudgeRuns()


def judge_batch(
    pairs: Sequence[tuple[GoldenCase, Capture]],
    metrics: Sequence[Metric],
    config: ScoringConfig,
    judge_config: JudgeConfig,
    lake_url: str,
    run_id: str | None,
    encoder: Any = None,
    spot_check: JudgeConfig | None = None,
    spot_sample: SpotSample | None = None,
) -> JudgedBatch:
    """Every judge step the batch's cases need, through the run's session (its ledger and budget)."""
    session = JUDGE_RUNS.open(judge_config, lake_url, run_id)
    return run_judge_batch(
        pairs, metrics, config, judge_config, session.ledger, session.budget, encoder, spot_check, spot_sample
    )
