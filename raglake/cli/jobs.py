"""Commands that do work: run an evaluation, re-score stored runs, gate a candidate."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake import prefect_settings
from raglake.analysis import LakeQueries
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import (
    LOCAL_JUDGE,
    LakeOpt,
    app,
    print_runs,
    split_option,
)
from raglake.embed.encoders import text_encoder
from raglake.errors import ConfigError
from raglake.gate import evaluate_gate, failing_rows, gate_verdicts, load_rules
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
    ctx: typer.Context,
    golden: opt.Golden = None,
    target: opt.Targets = None,
    k: opt.K = 5,
    lake: LakeOpt = None,
    run_id: opt.RunId = None,
    labels: opt.Labels = None,
    metrics: opt.Metrics = None,
    require_snippets: opt.RequireSnippets = False,
    batch_size: opt.BatchSize = None,
    embedder: opt.Embedder = None,
    device: opt.Device = "auto",
    theta_s: opt.ThetaS = 0.5,
    theta_h: opt.ThetaH = 0.7,
    bertscore_layer: opt.BertscoreLayer = None,
    bertscore_idf: opt.BertscoreIdf = False,
    judge: opt.Judge = None,
    judge_base_url: opt.JudgeBaseUrl = None,
    judge_model: opt.JudgeModel = None,
    judge_api_key_env: opt.JudgeApiKeyEnv = "OPENAI_API_KEY",
    judge_concurrency: opt.JudgeConcurrency = 8,
    judge_rpm: opt.JudgeRpm = None,
    judge_tpm: opt.JudgeTpm = None,
    judge_timeout: opt.JudgeTimeout = 60.0,
    judge_max_calls: opt.JudgeMaxCalls = None,
    judge_max_cost: opt.JudgeMaxCost = None,
    spot_check_model: opt.SpotCheckModel = None,
    spot_check_base_url: opt.SpotCheckBaseUrl = None,
    spot_check_variant: opt.SpotCheckVariant = False,
    spot_check_share: opt.SpotCheckShare = 0.1,
    spot_check_min: opt.SpotCheckMin = 10,
    runner: opt.Runner = "thread",
    results: opt.Results = None,
    verbose: opt.Verbose = False,
    quiet: opt.Quiet = False,
) -> None:
    """Evaluate targets on a golden set, land the runs in the lake and print how they did."""
    prefect_settings.apply(verbose=verbose)
    targets = target or [DEFAULT_TARGET]
    if run_id and len(targets) > 1:
        raise ConfigError("--run-id names one run; give a single --target with it")
    runs = checked_runs(targets, run_options(ctx.params))
    from raglake.cli import flowrun  # here, not at the top: commands that only read the lake never import Prefect

    run_ids = flowrun.evaluate_targets(runs, quiet=quiet)
    print_runs(open_lake(lake), run_ids)  # opened after the runs: a lake connection sees the runs committed before it


def run_options(p: dict) -> dict:
    """The RunSettings fields (less the target) that `raglake run`'s options ask for."""
    limits = {field: p[option] for field, option in JUDGE_LIMITS.items()}
    spot = {field: p[f"spot_check_{option}"] for field, option in SPOT_CHECK.items()}
    return dict(
        {name: p[name] for name in PLAIN_OPTIONS},
        golden=str(p["golden"] or SAMPLE_GOLDEN),
        labels=str(p["labels"]) if p["labels"] else None,
        metrics=split_option(p["metrics"]) or None,
        spot_check=spot if p["spot_check_model"] or p["spot_check_variant"] else None,
        judge=_judge_values(p["judge"], p["judge_base_url"], p["judge_model"], limits),
        scoring={name: p[name] for name in SCORING_OPTIONS},
    )


# `raglake run` options that are RunSettings fields as they are, and those of its nested models
PLAIN_OPTIONS = ("lake", "k", "require_snippets", "batch_size", "results", "embedder", "device", "runner", "run_id")
SCORING_OPTIONS = ("theta_s", "theta_h", "bertscore_layer", "bertscore_idf")
SPOT_CHECK = {"model": "model", "base_url": "base_url", "variant": "variant", "share": "share", "minimum": "min"}
JUDGE_LIMITS = {
    "api_key_env": "judge_api_key_env",
    "concurrency": "judge_concurrency",
    "requests_per_minute": "judge_rpm",
    "tokens_per_minute": "judge_tpm",
    "timeout_s": "judge_timeout",
    "max_calls": "judge_max_calls",
    "max_cost_usd": "judge_max_cost",
}


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


@app.command()
def rescore(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Run ids, prefixes or latest~N.")] = None,
    since: Annotated[Optional[str], typer.Option(help="Runs started on or after this date (YYYY-MM-DD).")] = None,
    until: Annotated[Optional[str], typer.Option(help="Runs started on or before this date.")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Every run in the lake.")] = False,
    metrics: Annotated[
        Optional[list[str]], typer.Option("--metrics", "-m", help="Only these metrics (comma-separated).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be recomputed and what judge calls it costs.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Recompute every selected metric, changed or not.")] = False,
    embedder: Annotated[Optional[str], typer.Option(help="Embedder (default: the one each run used).")] = None,
    device: opt.Device = "auto",
    judge_base_url: Annotated[
        Optional[str], typer.Option(help="Judge for judge metrics (without one they are kept).")
    ] = None,
    judge_model: Annotated[Optional[str], typer.Option(help="Judge model.")] = None,
    judge_api_key_env: opt.JudgeApiKeyEnv = "OPENAI_API_KEY",
    judge_max_calls: Annotated[Optional[int], typer.Option(help="Budget in judge calls.")] = None,
    judge_max_cost: Annotated[Optional[float], typer.Option(help="Budget in US dollars.")] = None,
    lake: LakeOpt = None,
    runner: Annotated[str, typer.Option(help="Where scoring batches run: thread, or dask[:ADDRESS].")] = "thread",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    verbose: opt.Verbose = False,
) -> None:
    """Re-score stored runs with the current registry, without calling the target: unchanged work is
    kept (a cache hit), changed metrics get new rows under a new scoring id."""
    prefect_settings.apply(verbose=verbose)
    try:
        start = dt.date.fromisoformat(since) if since else None
        end = dt.date.fromisoformat(until) if until else None
    except ValueError as e:
        raise ConfigError(f"--since/--until take YYYY-MM-DD: {e}") from None
    judge = _rescore_judge(judge_base_url, judge_model, judge_api_key_env, judge_max_calls, judge_max_cost)
    q = open_lake(lake)
    settings = build(
        RescoreSettings,
        run_ids=select_runs(q, runs, start, end, all_runs),
        metrics=split_option(metrics) or None,
        lake=lake,
        embedder=embedder,
        device=device,
        judge=judge,
        runner=runner,
        force=force,
        dry_run=dry_run,
    )
    if dry_run:
        print_rescore_plan(q, settings)
        return
    from raglake.cli import flowrun  # here, not at the top: a dry run (and every read command) never imports Prefect

    report = flowrun.rescore_runs(settings, quiet=quiet)
    for run_id, r in report["runs"].items():
        render.console.print(
            f"{run_id}: recomputed {r['recompute']} metric(s) ({r.get('rows', 0)} rows), kept {r['keep']} unchanged"
        )


def _rescore_judge(
    base_url: str | None, model: str | None, key_env: str, max_calls: int | None, max_cost: float | None
) -> dict | None:
    """The judge a rescore re-judges with, or None: judge metrics are kept."""
    if not (base_url or model):
        return None
    return dict(
        base_url=base_url or "", model=model or "", api_key_env=key_env, max_calls=max_calls, max_cost_usd=max_cost
    )


def print_rescore_plan(q: LakeQueries, settings: RescoreSettings) -> None:
    """A dry run: per run, what would be recomputed and about how many judge calls it costs."""
    judge_config = settings.judge.config() if settings.judge is not None else None
    selected = select_metrics(settings.metrics)
    for run_id in settings.run_ids or []:
        stored = load_stored_run(q, run_id)
        key = (
            text_encoder(settings.embedder or stored.run_config.get("embedder_arg"), None).embedder.key
            if needs_embedder(selected)
            else None
        )
        decisions = settings.decide(
            plan_rescore(
                q, [run_id], selected, embedder_key=key, judge_model=judge_config.model if judge_config else None
            )
        )
        todo = [get_metric(d.metric) for d in decisions if d.compute]
        render.console.print(
            render.rows_table(
                [d.__dict__ for d in decisions if d.compute]
                or [{"run_id": run_id, "metric": "(none)", "compute": False, "reason": "all unchanged"}],
                f"run {run_id}: {len(todo)} to recompute, {len(decisions) - len(todo)} kept",
            )
        )
        calls = estimate_judge_calls(stored, todo, judge_config, q.lake.url)
        render.console.print(f"judge calls: about {calls['calls']} ({calls['in_ledger']} already in the ledger, free)")


@app.command()
def gate(
    candidate: Annotated[str, typer.Option("--candidate", help="The run under test (id, prefix or latest~N).")],
    rules: Annotated[Path, typer.Option("--rules", help="Gate rules (YAML): which metrics, slices and allowed drops.")],
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", help="Baseline run, or 'latest': the previous run of the candidate's target and golden set."
        ),
    ] = "latest",
    allow_missing_baseline: Annotated[
        bool,
        typer.Option(
            "--allow-missing-baseline",
            help="With --baseline latest: pass (exit 0, saying so) when the candidate is its target's first "
            "committed run on this golden set, instead of failing with exit 2 (a CI job's first run).",
        ),
    ] = False,
    lake: LakeOpt = None,
) -> None:
    """Fail (exit 1) when a gated metric drops on a slice by more than its rule allows and the drop is
    real (Benjamini-Hochberg at the rules' `fdr` across the checks, or with `fdr: off` the slice's 95%
    interval excludes zero); print the failing rows."""
    gate_rules = load_rules(rules)
    q = open_lake(lake)
    cand = q.run_ids([candidate])[0]
    if baseline == "latest":
        base = q.previous_run(cand)
        if base is None and allow_missing_baseline:
            render.console.print(
                f"gate: {q.target_name(cand)} {cand} is the first committed run of its target on this golden set: "
                f"no baseline to compare with, nothing checked: pass (--allow-missing-baseline)"
            )
            return
        if base is None:
            raise ConfigError(
                f"run {cand} has no earlier run of the same target and golden set; give --baseline RUN "
                f"(or --allow-missing-baseline to pass a first run)"
            )
    else:
        base = q.run_ids([baseline])[0]
    checked, failing = evaluate_gate(q, base, cand, gate_rules)
    render.console.print(gate_verdicts(gate_rules, len(checked)))
    title = f"gate: {q.target_name(cand)} {cand} against {base}: {len(checked)} checks, {len(failing)} failing"
    if failing:
        render.console.print(render.gate_failing_table(failing_rows(failing), title))
        raise typer.Exit(code=1)
    render.console.print(f"{title}: pass")
