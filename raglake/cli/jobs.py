"""Commands that do work: run an evaluation, re-score stored runs, gate a candidate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from raglake import prefect_server, prefect_settings
from raglake.analysis import LakeQueries
from raglake.cli import interrupt, render
from raglake.cli import options as opt
from raglake.cli.common import (
    FileLakeOpt,
    app,
    print_runs,
    split_option,
)
from raglake.cli.settings_options import with_settings_options
from raglake.config.front import gate_rules as front_gate_rules
from raglake.config.front import resolve, settings_for
from raglake.embed import process
from raglake.embed.encoders import text_encoder
from raglake.errors import ConfigError
from raglake.gate import evaluate_gate, failing_rows, gate_verdicts
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import embeds_packaged_on_cpu, needs_embedder
from raglake.pipeline.lakes import after_run, open_lake
from raglake.pipeline.orchestration import needs_prefect
from raglake.pipeline.plan import plan_run
from raglake.pipeline.rescore import (
    estimate_judge_calls,
    load_stored_run,
    plan_rescore,
    select_runs,
)
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings


@app.command()
@with_settings_options(RunSettings)
def run(
    config: opt.Config = None,
    target: opt.Targets = None,
    judge: opt.Judge = None,
    verbose: opt.Verbose = False,
    quiet: opt.Quiet = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Evaluate targets on a golden set, land the runs in the lake and print how they did. The evaluation is
    the eval file's (raglake.yaml in the working folder, or -c FILE) when there is one; every option below
    overrides its field."""
    prefect_settings.apply(verbose=verbose)
    overrides = {path: split_option(v) if isinstance(v, list) else v for path, v in (settings or {}).items()}
    overrides["targets"] = target or None
    if judge is not None:
        if judge != "local":
            raise ConfigError(f"--judge takes 'local' (or give --judge-base-url and --judge-model), got {judge!r}")
        overrides["judge.local"] = True
    evaluation = resolve(config, overrides)
    if not any(embeds_packaged_on_cpu(r.chosen_metrics(), r.embedder, r.device) for r in evaluation.runs):
        process.discard_early()  # raglake.command's guess, stopped before the inputs are read: no run takes it
    for note in evaluation.notes:
        render.console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    # every input checked (once) before the first run: a typo never starts Prefect
    plans = [plan_run(s) for s in evaluation.runs]
    # SIGINT/SIGTERM from here on stop Prefect's temporary server too, even before it answers (the runs' own
    # notes come from evaluate_plans: nothing of them is written before it)
    with interrupt.stoppable(lambda: ""), interrupt.cleanup(prefect_server.discard_early):
        if needs_prefect(plans):  # Prefect's temporary server starts while Prefect and the flows are imported
            prefect_server.launch_early()
        try:
            from raglake.cli import flowrun  # here, not at the top: read-only commands never import Prefect

            run_ids = flowrun.evaluate_plans(plans, quiet=quiet)
        finally:
            prefect_server.discard_early()  # a launch start_api did not adopt (an error before it)

    def summaries(q: LakeQueries) -> str:
        with render.console.capture() as printed:  # held until whole: a second try (after_run) never prints twice
            print_runs(q, run_ids)
        return printed.get()

    # opened after the runs: a lake connection sees the runs committed before it
    render.write_held(after_run(plans[0].lake, summaries))


@app.command()
@with_settings_options(RescoreSettings)
def rescore(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Run ids, prefixes or latest~N.")] = None,
    config: opt.Config = None,
    quiet: opt.Quiet = False,
    verbose: opt.Verbose = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Re-score stored runs with the current registry, without calling the target: unchanged work is
    kept (a cache hit), changed metrics get new rows under a new scoring id. The eval file's (raglake.yaml,
    or -c FILE) own metrics, rubrics and assertions are re-scored from their current definitions."""
    prefect_settings.apply(verbose=verbose)
    values = {path: split_option(v) if isinstance(v, list) else v for path, v in (settings or {}).items()}
    chosen = settings_for(RescoreSettings, config, values, RESCORE_SHARED)
    if chosen.metrics is None and chosen.extensions.source is not None:  # the eval file's metrics: its list,
        chosen = chosen.model_copy(update={"metrics": resolve(config).runs[0].metrics})  # families and variants
    q = open_lake(chosen.lake)
    chosen = chosen.model_copy(update={"run_ids": select_runs(q, runs, chosen.since, chosen.until, chosen.all_runs)})
    if chosen.dry_run:
        print_rescore_plan(q, chosen)
        return
    from raglake.cli import flowrun  # here, not at the top: a dry run (and every read command) never imports Prefect

    report = flowrun.rescore_runs(chosen, quiet=quiet)
    for run_id, r in report["runs"].items():
        render.console.print(
            f"{run_id}: recomputed {r['recompute']} metric(s) ({r.get('rows', 0)} rows), kept {r['keep']} unchanged"
        )


RESCORE_SHARED = ("lake", "embedder", "device", "judge", "runner")  # what a re-scoring takes from an eval file


def print_rescore_plan(q: LakeQueries, settings: RescoreSettings) -> None:
    """A dry run: per run, what would be recomputed and about how many judge calls it costs."""
    judge_config = settings.judge.config() if settings.judge is not None else None
    selected = settings.extensions.select(settings.metrics)
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
    rules: Annotated[
        Optional[Path],
        typer.Option(
            "--rules",
            help="Gate rules (YAML): which metrics, slices and allowed drops (default: the eval file's `gate:`).",
        ),
    ] = None,
    config: opt.Config = None,
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
    lake: FileLakeOpt = None,
) -> None:
    """Fail (exit 1) when a gated metric drops on a slice by more than its rule allows and the drop is
    real (Benjamini-Hochberg at the rules' `fdr` across the checks, or with `fdr: off` the slice's 95%
    interval excludes zero); print the failing rows."""
    gate_rules, file_lake = front_gate_rules(config, rules)
    q = open_lake(lake or file_lake)
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
