"""Landing one run: every table's rows for the run, written file by file, the `runs` row last
(a run becomes visible to readers only when that row exists)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from raglake.errors import LakeError
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.registry import RunValue
from raglake.pipeline.scoring import ScoredBatch
from raglake.schemas import Capture, GoldenCase


@dataclass
class RunRecord:
    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime
    target: str
    target_kind: str
    target_name: str
    dataset_name: str
    dataset_path: str
    dataset_hash: str
    n_cases: int
    k: int
    require_snippets: bool
    code_version: str
    metric_versions: dict[str, str]
    config: dict[str, Any]
    status: str = "completed"
    embedder: str | None = None
    judge_models: str | None = None
    prompt_versions: dict[str, str] = field(default_factory=dict)
    index_version: str | None = None
    index_info: dict[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, list[Any]]:
        row = asdict(self)
        for key in ("metric_versions", "prompt_versions", "index_info"):
            row[key] = json.dumps(row[key], sort_keys=True)
        row["config_json"] = json.dumps(row.pop("config"), sort_keys=True, default=str)
        return {k: [v] for k, v in row.items()}


def capture_hash(capture: Capture) -> str:
    return hashlib.sha256(capture.model_dump_json().encode()).hexdigest()[:16]


def case_columns(cases: Sequence[GoldenCase], captures: Sequence[Capture]) -> dict[str, list[Any]]:
    rows = []
    for case, cap in zip(cases, captures):
        lat = cap.latency_ms
        rows.append({
            "case_id": case.id, "question": case.question, "reference_answer": case.reference_answer,
            "answerable": case.answerable, "category": case.category, "difficulty": case.difficulty,
            "tags": list(case.tags), "vault": case.vault, "expected_action": case.expected_action,
            "recency_conflict_rule": case.recency_conflict_rule, "n_gold_supports": len(case.gold_supports),
            "gold_supports": json.dumps([s.model_dump(mode="json") for s in case.gold_supports]),
            "metadata": json.dumps(case.metadata, default=str),
            "method": cap.method, "capture_status": cap.status, "capture_error": cap.error,
            "answer": cap.answer, "abstained": cap.abstained,
            "references": json.dumps([r.model_dump(mode="json") for r in cap.references]),
            "n_retrieved": len(cap.retrieved), "folder_mode": cap.folder_mode,
            "selected_folders": list(cap.selected_folders),
            "latency_folder_selection_ms": lat.folder_selection, "latency_retrieval_ms": lat.retrieval,
            "latency_generation_ms": lat.generation, "latency_total_ms": lat.total, "latency_wall_ms": lat.wall,
            "capture_hash": capture_hash(cap), "capture_attempts": cap.attempts,
            "golden_case": case.model_dump_json(),
        })
    return {name: [r[name] for r in rows] for name in TABLES["cases"].schema.names}


def run_metric_columns(values: Sequence[RunValue], versions: dict[str, str]) -> dict[str, list[Any]]:
    return {
        "metric": [v.metric for v in values], "stage": [v.stage for v in values],
        "value": [v.value for v in values], "n": [v.n for v in values], "unit": [v.unit for v in values],
        "metric_version": [versions.get(v.metric) for v in values],
    }


def scores_table(scored: ScoredBatch, scoring_id: str, scored_at: dt.datetime) -> pa.Table:
    cols = dict(scored.scores)
    n = len(cols["case_id"])
    cols["scoring_id"] = [scoring_id] * n
    cols["scored_at"] = [scored_at] * n
    return to_arrow(TABLES["scores"], cols)


RUN_TABLES = tuple(name for name, spec in TABLES.items() if spec.partition == "run_id")


def is_committed(lake: Lake, run_id: str) -> bool:
    return any(f"/{run_id}.parquet" in f.replace("\\", "/") for f in lake.files("runs"))


def clear_uncommitted(lake: Lake, run_id: str) -> list[str]:
    """Remove whatever earlier attempts of an uncommitted run left: every file of the run in every
    run_id-partitioned table, whatever its name or the settings it was written with, and the temp
    files of an interrupted commit. Returns what was removed.

    An uncommitted run has no visible rows by definition, so nothing a reader could see goes."""
    if is_committed(lake, run_id):
        raise LakeError(f"run {run_id} is already in the lake at {lake.url}; choose another --run-id")
    stale = [f for name in RUN_TABLES for f in lake.partition_files(name, run_id)] + lake.temp_files("runs", run_id)
    lake.remove(stale)
    return stale


def land_run(
    lake: Lake,
    run: RunRecord,
    cases: Sequence[GoldenCase],
    captures: Sequence[Capture],
    scored: ScoredBatch,
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> None:
    """Clear what earlier attempts of the run left, write the run's files, then its runs row."""
    tables = {
        "cases": to_arrow(TABLES["cases"], case_columns(cases, captures)),
        "chunks": to_arrow(TABLES["chunks"], scored.chunks),
        "labels": to_arrow(TABLES["labels"], scored.labels),
        "scores": scores_table(scored, scoring_id, run.finished_at),
        "run_metrics": to_arrow(TABLES["run_metrics"], run_metric_columns(run_values, run.metric_versions)),
    }
    if coverage:
        tables["coverage"] = to_arrow(TABLES["coverage"], coverage)
    clear_uncommitted(lake, run.run_id)
    written = {lake.write(name, run.run_id, table, scoring_id if name == "scores" else run.run_id)
               for name, table in tables.items()}
    found = {f for name in RUN_TABLES for f in lake.partition_files(name, run.run_id)}
    if found != written or is_committed(lake, run.run_id):
        raise LakeError(f"another process is landing run {run.run_id} in {lake.url} at the same time; "
                        "nothing was committed: run it again with another --run-id")
    lake.write("runs", run.started_at.date().isoformat(), to_arrow(TABLES["runs"], run.columns()), run.run_id)
