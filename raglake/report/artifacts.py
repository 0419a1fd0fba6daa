"""What the evaluate flow publishes as Prefect artifacts: a Markdown summary of a run (and of its
comparison with a baseline) and a table of its headline metrics. Plain values only (no Prefect here):

    create_markdown_artifact(summary_markdown(q, run_id, previous), key="raglake-summary")
    create_table_artifact(summary_table(q, run_id), key="raglake-headline")
"""

from __future__ import annotations

from typing import Any

from raglake.analysis import LakeQueries
from raglake.metrics.registry import all_metrics
from raglake.report.data import comparison, headline_rows, run_info
from raglake.report.format import number, pvalue, rounded, slice_label

ARTIFACT_FAMILIES = ("retrieval", "abstention", "embedding", "judge")
MAX_SLICE_LINES = 10


def _md(value: Any) -> str:
    """A table cell (numbers as raglake.report.format.number shows them): no pipe or newline breaks the table."""
    return number(value).replace("|", "\\|").replace("\n", " ")


def summary_table(q: LakeQueries, run_id: str, *, n_boot: int = 1000) -> list[dict[str, Any]]:
    """The run's headline metrics (retrieval, abstention, embedding, judge; those with ok values), in
    the registry's order: metric, family, n, mean, ci_low, ci_high, and the cases not scored."""
    headline, _ = headline_rows(q, run_id, n_boot=n_boot)
    return [
        {
            "metric": r["metric"],
            "family": r["family"],
            "higher_is_better": r["higher_is_better"],
            "n": r["n"],
            "mean": rounded(r["mean"]),
            "ci_low": rounded(r["ci_low"]),
            "ci_high": rounded(r["ci_high"]),
            "not_scored": r["n_rows"] - r["n"],
        }
        for r in headline
        if r["family"] in ARTIFACT_FAMILIES
    ]


def summary_markdown(
    q: LakeQueries,
    run_id: str,
    against: str | None = None,
    *,
    n_boot: int = 1000,
    table: list[dict[str, Any]] | None = None,
) -> str:
    """A run in Markdown: what ran, its headline metrics with 95% CIs, its latency and failure rates,
    and with `against` the overall comparison with that baseline plus the slices that regressed.
    `table`: the run's summary_table when the caller has it already (its bootstrap is not run twice)."""
    info = run_info(q, run_id)
    lines = [
        f"# raglake run `{run_id}` · {_md(info['target_name'])}",
        "",
        (
            f"dataset **{_md(info['dataset_name'])}** ({info['n_cases']} cases, k={info['k']}) · started "
            f"{info['started_at']:%Y-%m-%d %H:%M %Z} · embedder `{_md(info['embedder'])}` · judge "
            f"`{_md(info['judge_models'])}` · index_version `{_md(info['index_version'])}`"
        ),
        "",
        "| metric | family | n | mean | 95% CI | not scored |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in summary_table(q, run_id, n_boot=n_boot) if table is None else table:
        arrow = "" if r["higher_is_better"] is None else (" ↑" if r["higher_is_better"] else " ↓")
        lines.append(
            f"| `{r['metric']}`{arrow} | {r['family']} | {r['n']} | {_md(r['mean'])} | "
            f"[{_md(r['ci_low'])}, {_md(r['ci_high'])}] | {r['not_scored']} |"
        )
    shown = {m.name for m in all_metrics(level="run") if m.headline}
    figures = [f for f in q.figures([run_id]) if f["metric"] in shown and f["stage"] in (None, "total")]
    if figures:
        lines += [
            "",
            "**Run figures:** "
            + " · ".join(
                f"{f['metric']}{'' if f['stage'] is None else ' (' + f['stage'] + ')'} {_md(f['value'])}"
                for f in figures
            ),
        ]
    if against:
        lines += _comparison_lines(q, against, run_id)
    return "\n".join(lines) + "\n"


def _comparison_lines(q: LakeQueries, baseline_id: str, run_id: str) -> list[str]:
    cmp = comparison(q, baseline_id, run_id)
    worse = [r for r in cmp.overall if r["regression"]]
    better = [r for r in cmp.overall if r["improvement"]]
    lines = [
        "",
        f"## Against `{baseline_id}` · {_md(cmp.baseline['target_name'])}",
        "",
        f"{len(worse)} metric(s) worse, {len(better)} better overall. {cmp.summary}."
        + (" **The index changed between the runs.**" if cmp.index_changed else ""),
        "",
        "| metric | pairs | baseline | candidate | Δ | 95% CI | q | verdict |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in cmp.overall:
        if r["family"] not in ARTIFACT_FAMILIES:
            continue
        verdict = "**worse**" if r["regression"] else "better" if r["improvement"] else "no clear change"
        lines.append(
            f"| `{r['metric']}` | {r['n_pairs']} | {_md(r['mean_a'])} | {_md(r['mean_b'])} | "
            f"{_md(r['diff'])} | [{_md(r['ci_low'])}, {_md(r['ci_high'])}] | {pvalue(r['q_value'])} | {verdict} |"
        )
    slices = [r for r in cmp.flagged if r["regression"]]
    if slices:
        lines += [
            "",
            f"Slices that regressed: {cmp.n_regressed}"
            + (f" (the {MAX_SLICE_LINES} largest)" if len(slices) > MAX_SLICE_LINES else ""),
        ]
        lines += [
            f"- `{r['metric']}` on {_md(slice_label(r['dimension'], r['slice']))}: {_md(r['mean_a'])} → "
            f"{_md(r['mean_b'])} (Δ {_md(r['diff'])}, n={r['n_pairs']})"
            for r in slices[:MAX_SLICE_LINES]
        ]
    return lines
