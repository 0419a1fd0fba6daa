"""The lake's tables: their pyarrow schemas (defined here once) and partition columns.

Partition columns live only in the hive path (`scores/run_id=r-…/part.parquet`), not in the files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from raglake.errors import LakeError

TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition: str
    partition_type: pa.DataType
    schema: pa.Schema  # without the partition column

    @property
    def full_schema(self) -> pa.Schema:
        return self.schema.append(pa.field(self.partition, self.partition_type))


def _spec(
    name: str, partition: str, fields: list[tuple[str, pa.DataType]], ptype: pa.DataType = pa.string()
) -> TableSpec:
    return TableSpec(name, partition, ptype, pa.schema(fields))


RUNS = _spec(
    "runs",
    "run_date",
    [
        ("run_id", pa.string()),
        ("started_at", TS),
        ("finished_at", TS),
        ("status", pa.string()),
        ("target", pa.string()),
        ("target_kind", pa.string()),
        ("target_name", pa.string()),
        ("dataset_name", pa.string()),
        ("dataset_path", pa.string()),
        ("dataset_hash", pa.string()),
        ("n_cases", pa.int64()),
        ("k", pa.int32()),
        ("require_snippets", pa.bool_()),
        ("embedder", pa.string()),
        ("judge_models", pa.string()),
        ("prompt_versions", pa.string()),
        ("index_version", pa.string()),
        ("index_info", pa.string()),
        ("code_version", pa.string()),
        ("metric_versions", pa.string()),
        ("config_json", pa.string()),
    ],
    pa.date32(),
)

CASES = _spec(
    "cases",
    "run_id",
    [
        ("case_id", pa.string()),
        ("question", pa.string()),
        ("reference_answer", pa.string()),
        ("answerable", pa.bool_()),
        ("category", pa.string()),
        ("difficulty", pa.string()),
        ("tags", pa.list_(pa.string())),
        ("vault", pa.string()),
        ("expected_action", pa.string()),
        ("recency_conflict_rule", pa.string()),
        ("n_gold_supports", pa.int32()),
        ("gold_supports", pa.string()),
        ("metadata", pa.string()),
        ("method", pa.string()),
        ("capture_status", pa.string()),
        ("capture_error", pa.string()),
        ("answer", pa.string()),
        ("abstained", pa.bool_()),
        ("references", pa.string()),
        ("n_retrieved", pa.int32()),
        ("folder_mode", pa.string()),
        ("selected_folders", pa.list_(pa.string())),
        ("latency_folder_selection_ms", pa.float64()),
        ("latency_retrieval_ms", pa.float64()),
        ("latency_generation_ms", pa.float64()),
        ("latency_total_ms", pa.float64()),
        ("latency_wall_ms", pa.float64()),
        ("capture_hash", pa.string()),
        ("capture_attempts", pa.int32()),
        ("golden_case", pa.string()),  # the whole golden case as JSON (labels included), for re-scoring
    ],
)

CHUNKS = _spec(
    "chunks",
    "run_id",
    [
        ("case_id", pa.string()),
        ("rank", pa.int32()),
        ("rel_path", pa.string()),
        ("heading_path", pa.string()),
        ("text", pa.string()),
        ("score", pa.float64()),
        ("chunk_id", pa.string()),
        ("in_top_k", pa.bool_()),
        ("matched_supports", pa.list_(pa.int32())),
    ],
)

SCORES = _spec(
    "scores",
    "run_id",
    [
        ("case_id", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("metric_version", pa.string()),
        ("label_source", pa.string()),
        ("embedder", pa.string()),
        ("judge_model", pa.string()),
        ("prompt_id", pa.string()),
        ("prompt_version", pa.string()),
        ("judge_call", pa.string()),
        ("scoring_id", pa.string()),
        ("scored_at", TS),
    ],
)

LABELS = _spec(
    "labels",
    "run_id",
    [
        ("case_id", pa.string()),
        ("level", pa.string()),
        ("rank", pa.int32()),
        ("label", pa.string()),
        ("value", pa.int8()),
        ("label_source", pa.string()),
    ],
)

COVERAGE = _spec(
    "coverage",
    "run_id",
    [
        ("index_version", pa.string()),
        ("stat", pa.string()),
        ("doc_type", pa.string()),
        ("reason", pa.string()),
        ("value", pa.float64()),
    ],
)

RUN_METRICS = _spec(
    "run_metrics",
    "run_id",
    [
        ("metric", pa.string()),
        ("stage", pa.string()),
        ("value", pa.float64()),
        ("n", pa.int64()),
        ("unit", pa.string()),
        ("metric_version", pa.string()),
    ],
)

JUDGE_CALLS = _spec(
    "judge_calls",
    "call_date",
    [
        ("call_key", pa.string()),
        ("created_at", TS),
        ("run_id", pa.string()),
        ("model", pa.string()),
        ("base_url", pa.string()),
        ("prompt_id", pa.string()),
        ("prompt_version", pa.int32()),
        ("params", pa.string()),
        ("request", pa.string()),
        ("response", pa.string()),
        ("output", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("attempts", pa.int32()),
        ("retries", pa.int32()),
        ("repaired", pa.bool_()),
        ("truncated_retry", pa.bool_()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("latency_ms", pa.float64()),
        ("cost_usd", pa.float64()),
        ("price_known", pa.bool_()),
    ],
    pa.date32(),
)

TABLES: dict[str, TableSpec] = {
    t.name: t for t in (RUNS, CASES, CHUNKS, SCORES, LABELS, COVERAGE, RUN_METRICS, JUDGE_CALLS)
}


def to_arrow(spec: TableSpec, columns: dict[str, list], *, optional: Sequence[str] = ()) -> pa.Table:
    """Columns as a table of exactly the spec's schema. Every column must be given, of one length:
    a forgotten column is a LakeError, not nulls, unless it is named in `optional` (then it is nulls)."""
    names = spec.schema.names
    unknown = sorted(set(columns) - set(names))
    if unknown:
        raise LakeError(f"columns {unknown} are not in the {spec.name} schema (its columns: {', '.join(names)})")
    missing = [n for n in names if n not in columns and n not in optional]
    if missing:
        raise LakeError(f"rows for table {spec.name} lack column(s) {', '.join(missing)}")
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise LakeError(
            f"the columns given for table {spec.name} have different lengths: "
            + ", ".join(f"{k}={len(v)}" for k, v in columns.items())
        )
    n = lengths.pop() if lengths else 0
    arrays = [pa.array(columns[f.name] if f.name in columns else [None] * n, type=f.type) for f in spec.schema]
    return pa.Table.from_arrays(arrays, schema=spec.schema)
