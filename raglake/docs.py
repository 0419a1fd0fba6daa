"""The generated docs: the metric catalogue table (from the registry), with a user's own metrics after it
(`raglake metrics --markdown` where an eval file or --plugin names them), and docs/lake.md (from the lake's
table specs)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from raglake.lake.tables import TABLES
from raglake.metrics.registry import Metric, all_metrics

COLUMNS = ("metric", "family", "level", "version", "scale", "scale view", "better", "applies to", "seed", "same as")


def metrics_markdown() -> str:
    lines = [
        "# Metrics",
        "",
        "Generated from the registry by `raglake metrics --markdown > docs/metric-table.md`; a test keeps it in",
        "sync. The rules are those of METRICS.md; `version` changes whenever a rule changes a score.",
        "`scale view`: the SQL view (sql/views/) that shows the stored value on its seed's presentation scale",
        "(white paper 1-5, semantic similarity 0-100, factual accuracy letter grades), derived, never recomputed.",
        "`same as`: another metric that gives the same figure (this one a presentation of it): both are scored and",
        "landed, the CLI's tables, the report and `Result.summary()` show only the other one when a run has both.",
        "",
        *_header((*COLUMNS, "rule")),
    ]
    # a user's metric (plugin, entry point, rubric, assertion) is not part of raglake's docs: own_metrics_markdown
    lines += ["| " + " | ".join(_cells(m)) + " |" for m in all_metrics() if m.builtin]
    return "\n".join(lines)


def own_metrics_markdown(metrics: Sequence[Metric]) -> str:
    """The table of a user's own metrics (what metrics_markdown shows, plus where each is defined), to follow
    raglake's; "" when there is none. Their texts are the user's: a `|` or a line break in one is escaped."""
    if not metrics:
        return ""
    lines = [
        "## Your metrics",
        "",
        "Your own metrics, from the eval file and the plugins named (and installed packages' entry points):",
        "`origin` says how each is defined, `source` where (paths relative to the working folder).",
        "",
        *_header((*COLUMNS, "rule", "origin", "source")),
    ]
    for m in metrics:
        cells = [*_cells(m)[:-1], _escaped(m.description), m.origin, _escaped(_relative(m.source or ""))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _header(names: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(names) + " |", "| " + " | ".join("---" for _ in names) + " |"]


def _cells(m: Metric) -> list[str]:
    """A metric's cells under COLUMNS, then its rule."""
    better = {True: "higher", False: "lower", None: "–"}[m.higher_is_better]
    view = f"`{m.scale_view}`" if m.scale_view else ""
    same = f"`{m.same_as}`" if m.same_as else ""
    return [
        f"`{m.name}`",
        m.family,
        m.level,
        m.version,
        m.scale,
        view,
        better,
        m.applies_to,
        m.seed,
        same,
        m.description,
    ]


def _escaped(text: str) -> str:
    return " ".join(text.splitlines()).replace("|", "\\|")


def _relative(source: str) -> str:
    """A source under the working folder (an eval file's absolute path) as a path relative to it."""
    return source.removeprefix(f"{Path.cwd()}{os.sep}")


def _type(t: pa.DataType) -> str:
    return str(t).replace("timestamp[us, tz=UTC]", "timestamp (UTC)")


def lake_markdown() -> str:
    """docs/lake.md: every table of the lake and every column, from raglake.lake.tables' specs."""
    lines = [
        "# The lake's tables",
        "",
        "Generated from `raglake/lake/tables.py` by `python -m raglake.docs lake > docs/lake.md`; a test keeps it",
        "in sync. Each table is a folder of Parquet files, hive-partitioned (`scores/run_id=r-…/s-….parquet`);",
        "the partition column lives only in the folder name. Every column's description below is also stored",
        "in the files' schemas (Parquet field metadata `description`).",
        "",
        "A plain Parquet reader (DuckDB, pyarrow, pandas, Spark) needs three rules, which raglake's views apply:",
        "",
        "- **committed runs**: a run's rows in any run-partitioned table count only when `runs` has its",
        "  `run_id` (`committed = true`): the runs row is written last, so files of a crashed landing",
        "  have none. Join on `runs` (every run-partitioned table has `run_id`).",
        "- **current scores**: `scores WHERE is_latest` is the newest scoring of every run × case × metric",
        "  (raglake's `scores_latest` view; older scorings stay in `scores`).",
        "- **what a metric means**: `metrics` (one row per metric per scoring: family, scale, direction,",
        "  version, description); join scores on `run_id`, `scoring_id`, `metric`.",
        "",
        "```sql",
        "SELECT s.run_id, s.metric, m.direction, avg(s.value) AS mean",
        "FROM read_parquet('lake/scores/*/*.parquet', hive_partitioning = true, union_by_name = true) AS s",
        "JOIN read_parquet('lake/metrics/*/*.parquet', hive_partitioning = true) AS m",
        "    USING (run_id, scoring_id, metric)",
        "SEMI JOIN read_parquet('lake/runs/*/*.parquet', union_by_name = true) AS r",
        "    ON r.run_id = s.run_id AND r.committed",
        "WHERE s.is_latest AND s.status = 'ok'",
        "GROUP BY ALL",
        "```",
        "",
        "Raglake's own `metric_registry` view (not a file) is the registry of the code that reads the lake.",
        "",
        "Nested fields of a known shape are maps, structs and lists of structs (`metric_version_map['mrr_at_k']`,",
        "`unnest(gold_support_list)`); a free-form object stays a JSON string (its description says so). Lakes",
        "written before a typed column hold a JSON string column under the old name its description gives; the",
        "typed column is null in those files and the old one absent from newer files (raglake's views read both",
        "as the typed column).",
    ]
    for spec in TABLES.values():
        lines += ["", f"## `{spec.name}`", "", spec.doc, "", "| column | type | description |", "| --- | --- | --- |"]
        lines.append(f"| `{spec.partition}` (partition) | {_type(spec.partition_type)} | {spec.partition_doc} |")
        for f in spec.schema:
            lines.append(f"| `{f.name}` | {_type(f.type)} | {spec.description(f.name).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["lake"]:
        sys.exit("usage: python -m raglake.docs lake > docs/lake.md")
    sys.stdout.write(lake_markdown())
