"""The rows a run lands, as Arrow tables of the lake's schemas: the cases (golden case and capture
side by side), the staged batches' scores, labels and chunks, the run-level figures, the coverage and
the `runs` row. The lake's landing commits them (raglake.lake.landing); it knows nothing of these types."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from raglake.lake.landing import land_run
from raglake.lake.latest import settle
from raglake.lake.layouts import gold_support_list, reference_list, version_map
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.registry import Metric, RunValue, get_metric
from raglake.pipeline.staging import ScoredRef
from raglake.schemas import LATENCY_STAGES


@dataclass
class RunRecord:
    """What the `runs` row of a run says."""

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
    eval_file: str | None = None  # the eval file the run was made from, and the sha256 of its bytes
    eval_file_sha256: str | None = None

    def columns(self) -> dict[str, list[Any]]:
        row = asdict(self)
        row["metric_version_map"] = version_map(row.pop("metric_versions"))
        row["prompt_version_map"] = version_map(row.pop("prompt_versions"))
        row["index_info"] = json.dumps(row["index_info"], sort_keys=True)
        row["config_json"] = json.dumps(row.pop("config"), sort_keys=True, default=str)
        row["target_spec"] = row.pop("target")  # the lake's and the CLI's name for what --target was given
        row["committed"] = True  # the runs row is the run's commit: it is written last
        row["committed_at"] = dt.datetime.now(dt.timezone.utc)
        return {k: [v] for k, v in row.items()}

    def table(self) -> pa.Table:
        """The `runs` row as a one-row table."""
        return to_arrow(TABLES["runs"], self.columns())


def _case_row(case_line: bytes, capture_line: bytes) -> dict[str, Any]:
    """The `cases` row of a golden case and its capture given as canonical JSON (`model_dump_json()`):
    read with json, not pydantic (the lines were validated when they were made)."""
    case, cap = json.loads(case_line), json.loads(capture_line)
    lat = cap["latency_ms"]
    return {
        "case_id": case["id"],
        "question": case["question"],
        "reference_answer": case["reference_answer"],
        "answerable": case["answerable"],
        "category": case["category"],
        "difficulty": case["difficulty"],
        "tags": case["tags"],
        "vault": case["vault"],
        "expected_action": case["expected_action"],
        "recency_conflict_rule": case["recency_conflict_rule"],
        "n_gold_supports": len(case["gold_supports"]),
        "gold_support_list": gold_support_list(case["gold_supports"]),
        "metadata": metadata_json(case["metadata"]),
        "method": cap["method"],
        "capture_status": cap["status"],
        "capture_error": cap["error"],
        "answer": cap["answer"],
        "abstained": cap["abstained"],
        "reference_list": reference_list(cap["references"]),
        "n_retrieved": len(cap["retrieved"]),
        "folder_mode": cap["folder_mode"],
        "selected_folders": cap["selected_folders"],
        **{f"latency_{stage}_ms": lat[stage] for stage in LATENCY_STAGES},
        "capture_hash": capture_hash(capture_line),
        "capture_attempts": cap["attempts"],
        "cost_usd": cap.get("cost_usd"),  # in the line only when the target gave one
        "golden_case": case_line.decode(),
    }


def metadata_json(metadata: dict[str, Any]) -> str:
    """A case's free-form metadata as the cases row stores it."""
    return json.dumps(metadata, default=str)


def capture_hash(capture_line: bytes | memoryview) -> str:
    """The cases row's `capture_hash`: the first 16 hex digits of the canonical capture line's sha256."""
    return hashlib.sha256(capture_line).hexdigest()[:16]


def cases_table_from_lines(case_lines: bytes, capture_lines: bytes) -> pa.Table:
    """One row per case from a staged batch: canonical JSON lines of the cases and of their captures."""
    pairs = zip(case_lines.splitlines(), capture_lines.splitlines(), strict=True)
    rows = [_case_row(case, cap) for case, cap in pairs if case]
    names = TABLES["cases"].schema.names
    return to_arrow(TABLES["cases"], {name: [r[name] for r in rows] for name in names})


def metrics_table(metrics: Sequence[Metric], scoring_id: str, scored_at: dt.datetime) -> pa.Table:
    """What each metric of a scoring means (the lake's `metrics` table), from the registry."""
    rows = []
    for m in metrics:
        row = m.as_row()
        row["inputs"] = list(m.input_names)
        row["direction"] = {True: "higher", False: "lower", None: "none"}[m.higher_is_better]
        row.update(headline=m.headline, scoring_id=scoring_id, scored_at=scored_at)
        rows.append(row)
    names = TABLES["metrics"].schema.names
    return to_arrow(TABLES["metrics"], {name: [r[name] for r in rows] for name in names})


def run_metric_defs(run: RunRecord) -> list[Metric]:
    """The registry's metrics a run computed (its metric_versions), in registry order of names."""
    return [get_metric(name) for name in sorted(run.metric_versions)]


def run_metrics_table(values: Sequence[RunValue], versions: dict[str, str]) -> pa.Table:
    return to_arrow(
        TABLES["run_metrics"],
        {
            "metric": [v.metric for v in values],
            "stage": [v.stage for v in values],
            "value": [v.value for v in values],
            "n": [v.n for v in values],
            "unit": [v.unit for v in values],
            "metric_version": [versions.get(v.metric) for v in values],
        },
    )


def with_scoring(part: pa.Table, scoring_id: str, scored_at: dt.datetime) -> pa.Table:
    """A staged part of the scores (no scoring columns) with its scoring's id and time on every row."""
    n = part.num_rows
    part = part.append_column("scoring_id", pa.array([scoring_id] * n, pa.string()))
    part = part.append_column("scored_at", pa.array([scored_at] * n, TABLES["scores"].schema.field("scored_at").type))
    # the newest when written; raglake.lake.latest.settle flips superseded rows
    part = part.append_column("is_latest", pa.array([True] * n, pa.bool_()))
    return part.select(TABLES["scores"].schema.names).cast(TABLES["scores"].schema)


def with_scoring_id(part: pa.Table, scoring_id: str) -> pa.Table:
    """A staged part of the sentence scores with its scoring's id on every row."""
    part = part.append_column("scoring_id", pa.array([scoring_id] * part.num_rows, pa.string()))
    return part.select(TABLES["sentence_scores"].schema.names).cast(TABLES["sentence_scores"].schema)


def staged_parts(refs: Sequence[ScoredRef], name: str, scoring_id: str, scored_at: dt.datetime) -> Iterator[pa.Table]:
    """One staged table of every scored batch, in batch order, read one at a time."""
    for ref in sorted(refs, key=lambda r: r.index):
        part = ref.table(name)
        if name == "scores":
            yield with_scoring(part, scoring_id, scored_at)
        elif name == "sentence_scores":
            if part is not None:  # None: a batch staged before per-sentence scores existed
                yield with_scoring_id(part, scoring_id)
        else:
            yield part.cast(TABLES[name].schema)


def land_staged_run(
    lake: Lake,
    run: RunRecord,
    refs: Sequence[ScoredRef],
    run_values: Sequence[RunValue],
    scoring_id: str,
    coverage: dict[str, list[Any]] | None = None,
) -> None:
    """Land a run whose scored batches are staged (raglake.pipeline.staging): each table's file is
    streamed from the staged parts, so memory holds a row group, not the run; the runs row last."""
    tables: dict[str, Any] = {
        name: staged_parts(refs, name, scoring_id, run.finished_at)
        for name in ("cases", "chunks", "labels", "scores", "sentence_scores")
    }
    tables["run_metrics"] = run_metrics_table(run_values, run.metric_versions)
    tables["metrics"] = metrics_table(run_metric_defs(run), scoring_id, run.finished_at)
    if coverage:
        tables["coverage"] = to_arrow(TABLES["coverage"], coverage)
    stems = {"scores": scoring_id, "sentence_scores": scoring_id, "metrics": scoring_id}
    land_run(lake, run.run_id, run.started_at.date(), tables, run.table(), stems=stems)


def land_scoring(lake: Lake, run_id: str, refs: Sequence[ScoredRef], scoring_id: str) -> None:
    """Land a re-scoring of a committed run: its scores and sentence scores (one new file each, streamed
    from the staged batches), what its metrics mean (`metrics`), then `is_latest` settled on the run's
    scores (the rows it supersedes flipped to false). Settled first too: a crash between an earlier
    re-scoring's landing and its settle is repaired here."""
    settle(lake, run_id)
    now = dt.datetime.now(dt.timezone.utc)
    seen: set[str] = set()

    def scores() -> Iterator[pa.Table]:
        for part in staged_parts(refs, "scores", scoring_id, now):
            seen.update(part.column("metric").unique().to_pylist())
            yield part

    lake.write("scores", run_id, scores(), scoring_id)
    lake.write("sentence_scores", run_id, staged_parts(refs, "sentence_scores", scoring_id, now), scoring_id)
    lake.write("metrics", run_id, metrics_table([get_metric(m) for m in sorted(seen)], scoring_id, now), scoring_id)
    settle(lake, run_id)
