"""The steps of a meta-evaluation after scoring, by reference (the `metaeval` flow's tasks call these):
read the sampled items and the staged scores, compute the agreement rows and stage them, land them."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metaeval.agreement import CaseScore, Scores, Settings, dataset_rows
from raglake.metaeval.items import LabelledItem
from raglake.metrics.registry import get_metric
from raglake.pipeline.staging import ScoredRef, Store

_SCORE_COLUMNS = ["case_id", "metric", "value", "status", "reason", "metric_version", "embedder", "judge_model"]


@dataclass(frozen=True)
class AgreementWork:
    """What the agreement step needs: where the items lie, the metrics of each yardstick, the bootstrap."""

    metaeval_id: str
    results: str
    items_path: str
    metrics: dict[str, list[str]]  # yardstick -> metric names
    resamples: int
    seed: int
    created_at: dt.datetime
    totals: dict[str, int]
    sources: dict[str, str]
    config: dict[str, Any] = field(default_factory=dict)  # recorded on every row (config_json)


def read_scores(scored: Sequence[ScoredRef]) -> Scores:
    """(case id, metric) -> score, from the staged score tables of every scored batch."""
    out: Scores = {}
    for ref in scored:
        for r in ref.table("scores", _SCORE_COLUMNS).to_pylist():
            out[r["case_id"], r["metric"]] = CaseScore(
                r["value"], r["status"], r["reason"], r["metric_version"], r["embedder"], r["judge_model"]
            )
    return out


def read_staged_items(results: str, path: str) -> dict[str, list[LabelledItem]]:
    """The sampled items by data set, in file order."""
    sets: dict[str, list[LabelledItem]] = {}
    for line in Store(results).get(path).decode("utf-8").splitlines():
        if line.strip():
            item = LabelledItem.model_validate_json(line)
            sets.setdefault(item.dataset, []).append(item)
    return sets


def agreement_table(work: AgreementWork, scored: Sequence[ScoredRef]) -> pa.Table:
    """The metaeval rows of every data set (schema of the lake's `metaeval` table)."""
    scores = read_scores(scored)
    metrics = [get_metric(n) for n in dict.fromkeys(n for names in work.metrics.values() for n in names)]
    rows: list[dict[str, Any]] = []
    for name, items in read_staged_items(work.results, work.items_path).items():
        common = {
            "created_at": work.created_at,
            "source": work.sources.get(name),
            "n_total": work.totals.get(name, len(items)),
            "sample_seed": work.seed,
            "config_json": json.dumps(work.config, sort_keys=True, default=str),
        }
        rows.extend(dataset_rows(name, items, metrics, scores, Settings(work.resamples, work.seed, common)))
    names = TABLES["metaeval"].schema.names
    return to_arrow(TABLES["metaeval"], {c: [r.get(c) for r in rows] for c in names})


def stage_agreement(work: AgreementWork, scored: Sequence[ScoredRef]) -> str:
    """Compute and stage the rows; returns their path in the results location."""
    path = f"metaeval/{work.metaeval_id}/agreement.parquet"
    Store(work.results).put_table(path, agreement_table(work, scored))
    return path


def land_agreement(lake_url: str, metaeval_id: str, results: str, path: str) -> int:
    """Write the staged rows as the meta-evaluation's one file of the lake's `metaeval` table."""
    table = Store(results).get_table(path).cast(TABLES["metaeval"].schema)
    Lake(lake_url).write("metaeval", metaeval_id, table, metaeval_id)
    return table.num_rows
