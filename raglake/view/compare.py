"""What the Compare page shows: the verdict first, as the report and `raglake compare` give it
(raglake.report.data.comparison over sql/compare_runs.sql, raglake.analysis.verdict_headline), the slices
whose difference is real, and the cases that moved (the report's sql/worsened_cases.sql) with both answers
and which gold supports each run retrieved (sql/gold_retrieval.sql)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from raglake.analysis import DEFAULT_FDR, LakeQueries, verdict_headline
from raglake.errors import ConfigError
from raglake.lake.query import run_query
from raglake.metrics.registry import all_metrics
from raglake.report.data import MAX_WORST_METRICS, comparison, run_info, worsened_cases

WORSENED_N = 5  # cases per metric


def moved_metrics(cmp_overall: list[dict[str, Any]], have: set[str]) -> list[str]:
    """The metrics whose worst-moved cases are listed, as the report picks them: every metric that regressed
    overall, then the headline metrics, MAX_WORST_METRICS in all (never fewer than the regressed ones)."""
    regressed = [r["metric"] for r in cmp_overall if r["regression"]]
    headline = [m.name for m in all_metrics(level="case") if m.headline and m.name in have and m.name not in regressed]
    return regressed + headline[: max(0, MAX_WORST_METRICS - len(regressed))]


def gold_by_case(q: LakeQueries, run_a: str, run_b: str, case_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """case -> its gold supports, each with the rank at which each run retrieved it in its top k (None: missed)."""
    if not case_ids:
        return {}
    rows = run_query(q.con, "gold_retrieval", run_ids=[run_a, run_b], case_ids=case_ids).to_pylist()
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in rows:
        support = out[r["case_id"]].setdefault(
            r["support_index"],
            {"index": r["support_index"], "rel_path": r["rel_path"], "heading_path": r["heading_path"]},
        )
        support["a" if r["run_id"] == run_a else "b"] = r["rank_in_top_k"]
    return {case: list(supports.values()) for case, supports in out.items()}


def compare_page(q: LakeQueries, run_a: str, run_b: str) -> dict[str, Any]:
    """Run B (the candidate) against run A (the baseline)."""
    if run_a == run_b:
        raise ConfigError(f"both sides name run {run_a}: pick two different runs")
    cmp = comparison(q, run_a, run_b, fdr=DEFAULT_FDR)
    info_b = run_info(q, run_b)
    same_target = cmp.baseline["target_name"] == info_b["target_name"]
    a, b = (run_a, run_b) if same_target else (cmp.baseline["target_name"], info_b["target_name"])
    headline = verdict_headline(cmp.overall + cmp.flagged, f"B = {b} against A = {a}")
    have = {r["metric"] for r in cmp.overall}
    worsened = worsened_cases(q, run_a, run_b, moved_metrics(cmp.overall, have), WORSENED_N)
    case_ids = sorted({c["case_id"] for cases in worsened.values() for c in cases})
    notes = []
    if cmp.index_changed:
        notes.append(
            f"the index changed between the runs (index_version {cmp.baseline['index_version'] or '–'} → "
            f"{info_b['index_version'] or '–'})"
        )
    if cmp.baseline["dataset_hash"] != info_b["dataset_hash"]:
        notes.append("the runs used different golden sets: only the cases they share are compared")
    worse = [r for r in cmp.overall if r["regression"]]
    better = [r for r in cmp.overall if r["improvement"]]
    return {
        "a": cmp.baseline,
        "b": info_b,
        "cmp": cmp,
        "verdict": headline,
        "worse": worse,
        "better": better,
        "unchanged": [r for r in cmp.overall if not (r["regression"] or r["improvement"])],
        "worsened": worsened,
        "gold": gold_by_case(q, run_a, run_b, case_ids),
        "notes": notes,
    }
