"""Commands that do work: run an evaluation, re-score stored runs, gate a candidate."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake import prefect_settings
from raglake.analysis import LakeQueries
from raglake.cli import render
from raglake.cli.common import (
    LOCAL_JUDGE,
    LakeOpt,
    app,
    print_comparison,
    print_run_summary,
    split_option,
)
from raglake.embed.encoders import text_encoder
from raglake.errors import ConfigError
from raglake.gate import evaluate_gate, load_rules
from raglake.metrics.registry import get_metric, select_metrics
from raglake.pipeline.embedding import needs_embedder
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.plan import CHECKED, DEFAULT_TARGET, SAMPLE_GOLDEN, plan_run
from raglake.pipeline.rescore import (
    estimate_judge_calls,
    load_stored_run,
    plan_rescore,
    select_runs,
)
from raglake.pipeline.settings import RescoreSettings, RunSettings, build


@app.command()
def run(
    golden: Annotated[Optional[Path], typer.Option(help="Golden set (JSONL, JSON or YAML). Default: the bundled sample.")] = None,
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="builtin[:CORPUS_DIR], replay:FILE or replay-run:RUN_ID; repeat to compare several. Default: builtin over data/corpus.")] = None,
    k: Annotated[int, typer.Option(help="Top-K cut-off for retrieval metrics.")] = 5,
    lake: LakeOpt = None,
    run_id: Annotated[Optional[str], typer.Option(help="Run id to use (one target only).")] = None,
    labels: Annotated[Optional[Path], typer.Option(help="Human label annotation file (JSONL of {case_id, chunks, answers}).")] = None,
    metrics: Annotated[Optional[list[str]], typer.Option("--metrics", "-m", help="Only these case-level metrics (comma-separated).")] = None,
    require_snippets: Annotated[bool, typer.Option(help="A chunk matches a support only if it holds one of its snippets.")] = False,
    batch_size: Annotated[int, typer.Option(help="Cases per capture/scoring task.")] = 100,
    embedder: Annotated[Optional[str], typer.Option(help="Sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2).")] = None,
    theta_s: Annotated[float, typer.Option(help="context_sufficiency threshold θs (cosine).")] = 0.5,
    theta_h: Annotated[float, typer.Option(help="answer_hallucination threshold θh (cosine).")] = 0.4,
    bertscore_layer: Annotated[Optional[int], typer.Option(help="BERTScore hidden layer (default: the model's last).")] = None,
    bertscore_idf: Annotated[bool, typer.Option(help="Weight BERTScore tokens by idf over the run's references.")] = False,
    judge: Annotated[Optional[str], typer.Option("--judge", help="'local': start the bundled llama.cpp judge (extra local-judge) for the run.")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="OpenAI-compatible base URL of the judge (OpenAI, Azure, vLLM, Ollama, llama.cpp).")] = None,
    judge_model: Annotated[Optional[str], typer.Option(help="Judge model name.")] = None,
    judge_api_key_env: Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")] = "OPENAI_API_KEY",
    judge_concurrency: Annotated[int, typer.Option(help="Judge calls in flight at once.")] = 8,
    judge_rpm: Annotated[Optional[int], typer.Option(help="Judge requests per minute at most.")] = None,
    judge_tpm: Annotated[Optional[int], typer.Option(help="Judge tokens per minute at most (estimated).")] = None,
    judge_timeout: Annotated[float, typer.Option(help="Seconds per judge call.")] = 60.0,
    judge_max_calls: Annotated[Optional[int], typer.Option(help="Budget: stop judging after this many calls (the rest: skipped, reason budget).")] = None,
    judge_max_cost: Annotated[Optional[float], typer.Option(help="Budget: stop judging after this many US dollars.")] = None,
    spot_check_model: Annotated[Optional[str], typer.Option(help="Second judge model for the reliability spot-check.")] = None,
    spot_check_base_url: Annotated[Optional[str], typer.Option(help="Its base URL (default: the judge's).")] = None,
    spot_check_share: Annotated[float, typer.Option(help="Share of cases judged again.")] = 0.1,
    spot_check_min: Annotated[int, typer.Option(help="At least this many cases judged again.")] = 10,
    runner: Annotated[str, typer.Option(help="Where scoring batches run: thread, or dask[:ADDRESS] (prefect-dask; a 2-worker LocalCluster without ADDRESS).")] = "thread",
    results: Annotated[Optional[str], typer.Option(help="Prefect's task-result store: a folder or an fsspec URL (default $RAGLAKE_RESULTS or <lake>/_results).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's flow and task logs.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Evaluate targets on a golden set, land the runs in the lake and print how they did."""
    prefect_settings.apply(verbose=verbose)

    targets = target or [DEFAULT_TARGET]
    if run_id and len(targets) > 1:
        raise ConfigError("--run-id names one run; give a single --target with it")
    limits = dict(api_key_env=judge_api_key_env, concurrency=judge_concurrency, requests_per_minute=judge_rpm,
                  tokens_per_minute=judge_tpm, timeout_s=judge_timeout, max_calls=judge_max_calls,
                  max_cost_usd=judge_max_cost)
    spot = {"model": spot_check_model, "base_url": spot_check_base_url, "share": spot_check_share,
            "minimum": spot_check_min} if spot_check_model else None
    options = dict(golden=str(golden or SAMPLE_GOLDEN), lake=lake, k=k, labels=str(labels) if labels else None,
                   metrics=split_option(metrics) or None, require_snippets=require_snippets, batch_size=batch_size,
                   results=results, embedder=embedder, runner=runner, run_id=run_id, spot_check=spot,
                   judge=_judge_values(judge, judge_base_url, judge_model, limits),
                   scoring=dict(theta_s=theta_s, theta_h=theta_h, bertscore_layer=bertscore_layer,
                                bertscore_idf=bertscore_idf))
    runs = checked_runs(targets, options)
    from raglake.cli import flowrun  # here, not at the top: commands that only read the lake never import Prefect

    run_ids = flowrun.evaluate_targets(runs, quiet=quiet)
    print_runs(open_lake(lake), run_ids)  # opened after the runs: a lake connection sees the runs committed before it


def _judge_values(judge: str | None, base_url: str | None, model: str | None, limits: dict) -> dict | None:
    """The judge settings the options ask for: none, a remote endpoint, or the local server."""
    if judge not in (None, "local"):
        raise ConfigError(f"--judge takes 'local' (or give --judge-base-url and --judge-model), got {judge!r}")
    if judge == "local" and base_url:
        raise ConfigError("--judge local starts its own server: leave out --judge-base-url")
    if bool(base_url) != bool(model) and judge != "local":
        raise ConfigError("a judge needs both --judge-base-url and --judge-model")
    if judge == "local":
        return dict(limits, **LOCAL_JUDGE)
    return dict(limits, base_url=base_url, model=model) if base_url else None


def checked_runs(targets: list[str], options: dict) -> list[RunSettings]:
    """One RunSettings per target, every input checked before the first run starts (a typo never starts
    Prefect) and checked once: the flow takes what the check loaded (CHECKED). The run ids are fixed
    now, so that an interrupted run can be named (and finished with the same --run-id)."""
    runs = []
    for spec in targets:
        settings = build(RunSettings, **options, target=spec)
        runs.append(settings.model_copy(update={"run_id": plan_run(settings, CHECKED, keep=True).run_id}))
    return runs


def print_runs(q: LakeQueries, run_ids: list[str]) -> None:
    """Each run's summary, the comparisons between them (or with the previous run) and their ids."""
    for rid in run_ids:
        print_run_summary(q, rid)
    for other in run_ids[1:]:
        print_comparison(q, run_ids[0], other)
    if len(run_ids) == 1 and (previous := q.previous_run(run_ids[0])):
        render.console.print(f"against the previous run of this target on this golden set ({previous}):")
        print_comparison(q, previous, run_ids[0])
    render.console.print(f"landed run(s): {' '.join(run_ids)}  (lake: {q.lake.url})")


@app.command()
def rescore(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Run ids, prefixes or latest~N.")] = None,
    since: Annotated[Optional[str], typer.Option(help="Runs started on or after this date (YYYY-MM-DD).")] = None,
    until: Annotated[Optional[str], typer.Option(help="Runs started on or before this date.")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Every run in the lake.")] = False,
    metrics: Annotated[Optional[list[str]], typer.Option("--metrics", "-m", help="Only these metrics (comma-separated).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be recomputed and what judge calls it costs.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Recompute every selected metric, changed or not.")] = False,
    embedder: Annotated[Optional[str], typer.Option(help="Embedder (default: the one each run used).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="Judge for judge metrics (without one they are kept).")] = None,
    judge_model: Annotated[Optional[str], typer.Option(help="Judge model.")] = None,
    judge_api_key_env: Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")] = "OPENAI_API_KEY",
    judge_max_calls: Annotated[Optional[int], typer.Option(help="Budget in judge calls.")] = None,
    judge_max_cost: Annotated[Optional[float], typer.Option(help="Budget in US dollars.")] = None,
    lake: LakeOpt = None,
    runner: Annotated[str, typer.Option(help="Where scoring batches run: thread, or dask[:ADDRESS].")] = "thread",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
) -> None:
    """Re-score stored runs with the current registry, without calling the target: unchanged work is
    kept (a cache hit), changed metrics get new rows under a new scoring id."""
    try:
        start = dt.date.fromisoformat(since) if since else None
        end = dt.date.fromisoformat(until) if until else None
    except ValueError as e:
        raise ConfigError(f"--since/--until take YYYY-MM-DD: {e}") from None
    judge = dict(base_url=judge_base_url or "", model=judge_model or "", api_key_env=judge_api_key_env,
                 max_calls=judge_max_calls, max_cost_usd=judge_max_cost) if judge_base_url or judge_model else None
    q = open_lake(lake)
    settings = build(RescoreSettings, run_ids=select_runs(q, runs, start, end, all_runs), metrics=split_option(metrics) or None,
                     lake=lake, embedder=embedder, judge=judge, runner=runner, force=force, dry_run=dry_run)
    if dry_run:
        print_rescore_plan(q, settings)
        return
    from raglake.cli import flowrun  # here, not at the top: a dry run (and every read command) never imports Prefect

    report = flowrun.rescore_runs(settings, quiet=quiet)
    for run_id, r in report["runs"].items():
        render.console.print(f"{run_id}: recomputed {r['recompute']} metric(s) ({r.get('rows', 0)} rows), "
                             f"kept {r['keep']} unchanged")


def print_rescore_plan(q: LakeQueries, settings: RescoreSettings) -> None:
    """A dry run: per run, what would be recomputed and about how many judge calls it costs."""
    judge_config = settings.judge.config() if settings.judge is not None else None
    selected = select_metrics(settings.metrics)
    for run_id in settings.run_ids or []:
        stored = load_stored_run(q, run_id)
        key = text_encoder(settings.embedder or stored.run_config.get("embedder_arg"), None).embedder.key \
            if needs_embedder(selected) else None
        decisions = settings.decide(plan_rescore(q, [run_id], selected, embedder_key=key,
                                                 judge_model=judge_config.model if judge_config else None))
        todo = [get_metric(d.metric) for d in decisions if d.compute]
        render.console.print(render.rows_table([d.__dict__ for d in decisions if d.compute] or
                                               [{"run_id": run_id, "metric": "(none)", "compute": False, "reason": "all unchanged"}],
                                               f"run {run_id}: {len(todo)} to recompute, {len(decisions) - len(todo)} kept"))
        calls = estimate_judge_calls(stored, todo, judge_config, q.lake.url)
        render.console.print(f"judge calls: about {calls['calls']} ({calls['in_ledger']} already in the ledger, free)")


@app.command()
def gate(
    candidate: Annotated[str, typer.Option("--candidate", help="The run under test (id, prefix or latest~N).")],
    rules: Annotated[Path, typer.Option("--rules", help="Gate rules (YAML): which metrics, slices and allowed drops.")],
    baseline: Annotated[str, typer.Option("--baseline", help="Baseline run, or 'latest': the previous run of the candidate's target and golden set.")] = "latest",
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
    lake: LakeOpt = None,
) -> None:
    """Fail (exit 1) when a gated metric drops on a slice by more than its rule allows and the paired
    bootstrap CI excludes zero; print the failing rows."""
    gate_rules = load_rules(rules)
    q = open_lake(lake)
    cand = q.run_ids([candidate])[0]
    if baseline == "latest":
        base = q.previous_run(cand)
        if base is None:
            raise ConfigError(f"run {cand} has no earlier run of the same target and golden set; give --baseline RUN")
    else:
        base = q.run_ids([baseline])[0]
    checked, failing = evaluate_gate(q, base, cand, gate_rules, n_boot=n_boot)
    title = f"gate: {q.target_name(cand)} {cand} against {base}: {len(checked)} checks, {len(failing)} failing"
    if failing:
        shown = [{k: r[k] for k in ("metric", "dimension", "slice", "n_pairs", "mean_a", "mean_b", "drop", "max_drop",
                                    "ci_low", "ci_high")} for r in failing]
        render.console.print(render.rows_table(shown, title, 500))
        raise typer.Exit(code=1)
    render.console.print(f"{title}: pass")
