"""Backfills: re-score runs already in the lake from their stored captures with the current registry.
A (run, metric) is recomputed only when something that changes its score changed (metric version,
embedder, judge model, judge prompt versions) or when earlier judge calls failed; everything else is
kept, and new rows land under a new scoring id (the old ones stay queryable)."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from raglake.analysis import LakeQueries
from raglake.errors import ConfigError
from raglake.judge.ledger import JudgeLedger, call_key
from raglake.judge.stage import steps_for, wanted_steps
from raglake.judge.steps import prompt_refs, prompt_versions, step_prompt
from raglake.lake.calls import LakeCallStore
from raglake.lake.query import fetch
from raglake.lake.store import Lake
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric
from raglake.metrics.steps import CaseView
from raglake.pipeline.rows import land_scoring
from raglake.pipeline.staging import ScoredRef
from raglake.schemas import CANONICAL, Capture, GoldenCase
from raglake.targets.replay import ReplayRun


@dataclass
class StoredRun:
    run_id: str
    config: ScoringConfig
    cases: list[GoldenCase]
    captures: list[Capture]
    embedder: str | None
    known_docs: frozenset[str]
    run_config: dict[str, Any]


KEPT_NO_JUDGE = "kept: no judge given"


@dataclass(frozen=True)
class Decision:
    run_id: str
    metric: str
    compute: bool
    reason: str


def select_runs(
    q: LakeQueries,
    run_specs: list[str] | None = None,
    since: dt.date | None = None,
    until: dt.date | None = None,
    every: bool = False,
) -> list[str]:
    """Run ids by id/prefix/latest, by start date range (inclusive), or every run."""
    if sum(map(bool, (run_specs, since or until, every))) != 1:
        raise ConfigError("name the runs to re-score: run ids, or --since/--until dates, or --all")
    if run_specs:
        return q.run_ids(run_specs)
    rows = fetch(q.con, "SELECT run_id, CAST(started_at AS DATE) FROM runs ORDER BY started_at, run_id")
    chosen = [r for r, day in rows if every or ((since is None or day >= since) and (until is None or day <= until))]
    if not chosen:
        raise ConfigError("no run in the lake matches those dates")
    return chosen


def load_stored_run(q: LakeQueries, run_id: str) -> StoredRun:
    """The golden cases, captures and scoring settings a run landed with."""
    row = q.con.sql(
        "SELECT config_json, embedder, index_info FROM runs WHERE run_id = $r", params={"r": run_id}
    ).fetchall()
    if not row:
        raise ConfigError(f"no run {run_id} in the lake")
    config_json, embedder, index_info = row[0]
    run_config = json.loads(config_json or "{}")
    names = {f.name for f in fields(ScoringConfig)}
    config = ScoringConfig(**{k: v for k, v in run_config.items() if k in names})
    stored = fetch(q.con, "SELECT case_id, golden_case FROM cases WHERE run_id = $r ORDER BY case_id", r=run_id)
    missing = [cid for cid, golden in stored if not golden]
    if missing:
        raise ConfigError(
            f"run {run_id} was landed before cases kept their golden case ({len(missing)} cases); "
            "evaluate it again with replay-run:{run_id} instead"
        )
    cases = [GoldenCase.model_validate_json(golden, context=CANONICAL) for _, golden in stored]  # a model's dump
    replay = ReplayRun(run_id, q.lake)
    captures = replay.capture(cases)
    docs = frozenset(json.loads(index_info or "{}").get("doc_paths", []))
    return StoredRun(run_id, config, cases, captures, embedder, docs, run_config)


def plan_rescore(
    q: LakeQueries, run_ids: list[str], metrics: list[Metric], *, embedder_key: str | None, judge_model: str | None
) -> list[Decision]:
    """What to recompute, metric by metric, and why."""
    rows = fetch(
        q.con,
        """
        SELECT run_id, metric, list(DISTINCT metric_version),
               list(DISTINCT embedder) FILTER (WHERE embedder IS NOT NULL),
               list(DISTINCT judge_model) FILTER (WHERE judge_model IS NOT NULL),
               list(DISTINCT prompt_id || '@' || prompt_version) FILTER (WHERE prompt_id IS NOT NULL),
               count(*) FILTER (WHERE status IN ('judge_error', 'skipped') AND reason <> 'no_judge'),
               count(*) FILTER (WHERE reason = 'no_judge')
        FROM scores_latest WHERE list_contains($runs, run_id) GROUP BY ALL""",
        runs=list(run_ids),
    )
    stored = {(r[0], r[1]): r[2:] for r in rows}
    out = []
    for run_id in run_ids:
        for m in metrics:
            out.append(Decision(run_id, m.name, *_decide(m, stored.get((run_id, m.name)), embedder_key, judge_model)))
    return out


def _decide(m: Metric, stored: tuple | None, embedder_key: str | None, judge_model: str | None) -> tuple[bool, str]:
    if stored is None:
        return True, "not scored yet"
    versions, embedders, judges, prompts, failed, no_judge = stored
    if versions != [m.version]:
        return True, f"metric version {'/'.join(versions)} → {m.version}"
    if embedders and embedder_key and not all(e.startswith(embedder_key) for e in embedders):
        return True, f"embedder {embedders[0]} → {embedder_key}"
    if not m.steps:
        return False, "unchanged (cache hit)"
    if judge_model is None:
        return False, KEPT_NO_JUDGE
    if no_judge:
        return True, "was skipped: no judge"
    if judges and judges != [judge_model]:
        return True, f"judge {','.join(judges)} → {judge_model}"
    stale = _stale_prompts(prompts, prompt_versions(m.steps))
    if stale:
        ids, versions_now = prompt_refs(m.steps)
        return True, f"prompts {stale} → {ids}@{versions_now}"
    if failed:
        return True, f"{failed} earlier judge failure(s) to retry"
    return False, "unchanged (cache hit)"


def _stale_prompts(recorded: list[str] | None, current: dict[str, int]) -> str | None:
    """The first recorded "p1+p2@v1+v2" naming a prompt at a version other than its current one (a row
    records the prompts its calls used, so rows of one metric may name fewer prompts than the metric has)."""
    for ref in recorded or []:
        ids, _, versions = ref.partition("@")
        if any(current.get(p) is None or str(current[p]) != v for p, v in zip(ids.split("+"), versions.split("+"))):
            return ref
    return None


def summarize(decisions: list[Decision]) -> dict[str, Any]:
    by_reason: dict[str, int] = defaultdict(int)
    for d in decisions:
        by_reason[d.reason] += 1
    return {
        "recompute": sum(d.compute for d in decisions),
        "keep": sum(not d.compute for d in decisions),
        "by_reason": dict(by_reason),
    }


def new_scoring_id(run_id: str, metrics: list[str]) -> str:
    import hashlib

    stamp = dt.datetime.now(dt.timezone.utc).isoformat()
    return "s-" + hashlib.sha256(json.dumps([run_id, sorted(metrics), stamp]).encode()).hexdigest()[:12]


def land_scores(q: LakeQueries, run_id: str, scored: Sequence[ScoredRef], scoring_id: str) -> int:
    """Append a re-scoring's rows to the run (raglake.pipeline.rows.land_scoring: one atomic file per
    table under a new scoring id, streamed from the staged batches; then `is_latest` settled)."""
    land_scoring(q.lake, run_id, scored, scoring_id)
    return sum(r.n_scores for r in scored)


def estimate_judge_calls(stored: StoredRun, todo: list[Metric], judge_config: Any, lake_url: str) -> dict[str, int]:
    """How many judge calls re-scoring `todo` needs: calls per (case, step), and how many of the
    first prompts of those steps are already in the ledger (free). A second prompt (claims →
    verification) depends on the first answer, so it is counted as needed."""
    if judge_config is None:
        return {"calls": 0, "in_ledger": 0}
    # the lake's ledger as it is now (not the process-wide one a run judges with, which may predate calls since)
    ledger = JudgeLedger(LakeCallStore(Lake(lake_url)))
    wanted = wanted_steps(todo)
    calls = in_ledger = 0
    for case, capture in zip(stored.cases, stored.captures):
        view = CaseView.of(case, capture, stored.config.k)
        for step in steps_for(CaseContext(case, capture, stored.config), wanted):
            calls += len(step.prompts)
            first = step_prompt(step)  # a prompt file, or a rubric's own prompt
            values = step.values(view)
            params = {"temperature": 0, "seed": judge_config.seed, "max_tokens": first.max_tokens}
            if ledger.lookup(call_key(judge_config.model, first.id, first.version, params, first.render(values))):
                in_ledger += 1
    return {"calls": calls, "in_ledger": in_ledger}
