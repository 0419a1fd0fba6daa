"""The `raglake` command line: run evaluations and ask the lake questions."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake.analysis import COMPARE_DIMENSIONS, DIMENSIONS, LakeQueries, check_dimension, latest_per_target
from raglake.cli import render
from raglake.errors import ConfigError, RaglakeError
from raglake.lake.query import run_sql
from raglake.lake.store import Lake
from raglake.metrics.registry import all_metrics

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__, pretty_exceptions_enable=False)

LakeOpt = Annotated[Optional[str], typer.Option("--lake", help="Lake root (default $RAGLAKE_LAKE or data/lake).")]
HEADLINE_FAMILIES = ("retrieval", "abstention", "embedding")
MAX_SLICE_ROWS = 20


def _split(values: Optional[list[str]]) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _headline(rows: list[dict], chosen: list[str]) -> list[str]:
    if chosen:
        return chosen
    seen = {r["metric"]: r for r in rows if r["n"]}
    return [m.name for m in all_metrics(level="case") if m.name in seen and m.family in HEADLINE_FAMILIES]


def registry_order(rows: list[dict]) -> list[dict]:
    """Rows in the registry's order (family, then as registered), stable within equal metrics."""
    order = {m.name: i for i, m in enumerate(all_metrics())}
    return sorted(rows, key=lambda r: order.get(r["metric"], len(order)))


@contextlib.contextmanager
def _judge_endpoint(judge: str | None, remote: dict | None, settings: dict) -> Iterator[dict | None]:
    """The judge settings for the flow: a remote endpoint as given, or the local server for the run."""
    if judge != "local":
        yield remote
        return
    from raglake.judge.local import LOCAL_MODEL, local_judge_server

    render.console.print("starting the local judge (llama.cpp, SmolLM2-135M: weak, for a fully offline pipeline) …")
    with local_judge_server() as base_url:
        # llama.cpp's server answers one request at a time on this CPU: queueing more only times them out
        yield dict(settings, base_url=base_url, model=LOCAL_MODEL, label="local", concurrency=1,
                   timeout_s=max(settings["timeout_s"], 600.0))


NO_JUDGE_HINT = ("{n} judge metric value(s) were skipped: no judge is configured. Configure one with "
                 "--judge-base-url URL --judge-model NAME (the key is read from $OPENAI_API_KEY, or the variable "
                 "named by --judge-api-key-env), or use --judge local for the bundled offline model.")


def print_run_summary(q: LakeQueries, run_id: str) -> None:
    rows = registry_order([r for r in q.breakdown([run_id], "all") if r["n_rows"]])
    render.console.print(render.summary_table(rows, f"run {run_id} · {q.target_name(run_id)}"))
    no_judge = sum(r["n_skipped"] for r in rows if r["family"] == "judge" and r["main_reason"] == "no_judge")
    if no_judge:
        render.console.print(NO_JUDGE_HINT.format(n=no_judge))
    budget = sum(r["n_skipped"] for r in rows if r["main_reason"] == "budget")
    if budget:
        render.console.print(f"[yellow]{budget} judge metric value(s) were skipped: the judge budget ran out.[/]")
    figures = [f for f in q.figures([run_id]) if f["metric"] != "stage_seconds"]
    if figures:
        render.console.print(render.figures_table(figures, "run-level figures"))


def print_comparison(q: LakeQueries, run_a: str, run_b: str, *, by: str = "all", only_changes: bool = False,
                     n_boot: int = 1000, seed: int = 0) -> list[dict]:
    rows = registry_order(q.compare(run_a, run_b, n_boot=n_boot, seed=seed))
    name_a, name_b = q.target_name(run_a), q.target_name(run_b)
    versions = q.index_versions([run_a, run_b])
    if versions.get(run_a) != versions.get(run_b) and any(versions.values()):
        render.console.print(f"[yellow]note:[/] the index changed between the runs (index_version "
                             f"{versions.get(run_a) or '–'} → {versions.get(run_b) or '–'}); see `raglake coverage`")
    shown = [r for r in rows if (by == "any" or r["dimension"] == by) and (not only_changes or r["regression"] or r["improvement"])]
    title = f"A = {name_a} ({run_a})  vs  B = {name_b} ({run_b})"
    render.console.print(render.comparison_table(shown, f"A: {name_a}", f"B: {name_b}", title))
    flagged = [r for r in rows if r["dimension"] != "all" and (r["regression"] or r["improvement"])]
    if by == "all" and flagged:
        flagged.sort(key=lambda r: (not r["regression"], -abs(r["diff"])))
        title = f"slices where the difference is real (95% CI excludes 0): {len(flagged)}"
        if len(flagged) > MAX_SLICE_ROWS:
            title += f", the {MAX_SLICE_ROWS} largest shown (all: raglake compare {run_a} {run_b} --by any --changes)"
        render.console.print(render.comparison_table(flagged[:MAX_SLICE_ROWS], f"A: {name_a}", f"B: {name_b}", title))
    return rows


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
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's flow and task logs.")] = False,
) -> None:
    """Evaluate targets on a golden set, land the runs in the lake and print how they did."""
    from raglake.runplan import DEFAULT_TARGET, SAMPLE_GOLDEN, plan_run

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "INFO" if verbose else "WARNING")

    targets = target or [DEFAULT_TARGET]
    if run_id and len(targets) > 1:
        raise ConfigError("--run-id names one run; give a single --target with it")
    if judge not in (None, "local"):
        raise ConfigError(f"--judge takes 'local' (or give --judge-base-url and --judge-model), got {judge!r}")
    if judge == "local" and judge_base_url:
        raise ConfigError("--judge local starts its own server: leave out --judge-base-url")
    if bool(judge_base_url) != bool(judge_model) and judge != "local":
        raise ConfigError("a judge needs both --judge-base-url and --judge-model")
    judge_settings = dict(api_key_env=judge_api_key_env, concurrency=judge_concurrency, requests_per_minute=judge_rpm,
                          tokens_per_minute=judge_tpm, timeout_s=judge_timeout, max_calls=judge_max_calls,
                          max_cost_usd=judge_max_cost)
    spot = {"model": spot_check_model, "base_url": spot_check_base_url, "share": spot_check_share,
            "minimum": spot_check_min} if spot_check_model else None
    options = dict(golden=str(golden or SAMPLE_GOLDEN), lake=lake, k=k, labels=str(labels) if labels else None,
                   metrics=_split(metrics) or None, require_snippets=require_snippets, batch_size=batch_size,
                   embedder=embedder, scoring=dict(theta_s=theta_s, theta_h=theta_h, bertscore_layer=bertscore_layer,
                                                   bertscore_idf=bertscore_idf))
    remote = dict(judge_settings, base_url=judge_base_url, model=judge_model) if judge_base_url else None
    for spec in targets:  # check every input before the first run starts
        plan_run(target=spec, run_id=run_id, judge=remote or (dict(judge_settings, base_url="http://127.0.0.1:1/v1",
                 model="local") if judge == "local" else None), spot_check=spot, **options)
    from flows.evaluate import evaluate

    with _judge_endpoint(judge, remote, judge_settings) as judge_config:
        run_ids = [evaluate(target=spec, run_id=run_id, judge=judge_config, spot_check=spot, **options) for spec in targets]
    q = LakeQueries(Lake(lake))
    for rid in run_ids:
        print_run_summary(q, rid)
    for other in run_ids[1:]:
        print_comparison(q, run_ids[0], other)
    if len(run_ids) == 1 and (previous := q.previous_run(run_ids[0])):
        render.console.print(f"against the previous run of this target on this golden set ({previous}):")
        print_comparison(q, previous, run_ids[0])
    render.console.print(f"landed run(s): {' '.join(run_ids)}  (lake: {q.lake.url})")


@app.command()
def runs(lake: LakeOpt = None, limit: Annotated[int, typer.Option(help="How many runs to list.")] = 50) -> None:
    """List the runs in the lake, newest first."""
    render.console.print(render.rows_table(LakeQueries(Lake(lake)).runs(limit), "runs"))


@app.command()
def breakdown(
    run: Annotated[Optional[list[str]], typer.Option("--run", "-r", help="Run id, prefix, 'latest' or 'latest~N'; repeatable. Default: latest (with --by target: the latest run of every target).")] = None,
    by: Annotated[str, typer.Option(help=f"One of {', '.join(DIMENSIONS)}.")] = "category",
    metrics: Annotated[Optional[list[str]], typer.Option("--metrics", "-m", help="Metrics to show (default: retrieval and abstention).")] = None,
    long: Annotated[bool, typer.Option("--long", help="One row per slice × metric, with status counts.")] = False,
    lake: LakeOpt = None,
) -> None:
    """Every case-level metric of a run by slice: n and mean."""
    check_dimension(by)
    q = LakeQueries(Lake(lake))
    run_ids = q.run_ids(run) if run else (latest_per_target(q.con) if by == "target" else q.run_ids(["latest"]))
    rows = q.breakdown(run_ids, by)
    chosen = _split(metrics)
    if long:
        render.console.print(render.rows_table(rows, f"breakdown by {by}", 5000))
        return
    render.console.print(render.pivot_table(rows, _headline(rows, chosen), f"breakdown by {by}: mean (n) · runs {', '.join(run_ids)}"))


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(help="Baseline run (id, prefix or latest~N).")],
    run_b: Annotated[str, typer.Argument(help="Candidate run.")],
    by: Annotated[str, typer.Option(help=f"Slice dimension to show: {', '.join(COMPARE_DIMENSIONS)} or 'any'.")] = "all",
    changes: Annotated[bool, typer.Option("--changes", help="Only rows where the CI excludes zero.")] = False,
    n_boot: Annotated[int, typer.Option(help="Bootstrap resamples.")] = 1000,
    seed: Annotated[int, typer.Option(help="Bootstrap seed.")] = 0,
    lake: LakeOpt = None,
) -> None:
    """Run B against run A per metric and slice, with a paired bootstrap 95% CI."""
    if by != "any":
        check_dimension(by, COMPARE_DIMENSIONS)
    q = LakeQueries(Lake(lake))
    a, b = q.run_ids([run_a])[0], q.run_ids([run_b])[0]
    print_comparison(q, a, b, by=by, only_changes=changes, n_boot=n_boot, seed=seed)


@app.command()
def rescore(
    runs: Annotated[Optional[list[str]], typer.Argument(help="Run ids, prefixes or latest~N.")] = None,
    since: Annotated[Optional[str], typer.Option(help="Runs started on or after this date (YYYY-MM-DD).")] = None,
    until: Annotated[Optional[str], typer.Option(help="Runs started on or before this date.")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Every run in the lake.")] = False,
    metrics: Annotated[Optional[list[str]], typer.Option("--metrics", "-m", help="Only these metrics (comma-separated).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be recomputed and what judge calls it costs.")] = False,
    embedder: Annotated[Optional[str], typer.Option(help="Embedder (default: the one each run used).")] = None,
    judge_base_url: Annotated[Optional[str], typer.Option(help="Judge for judge metrics (without one they are kept).")] = None,
    judge_model: Annotated[Optional[str], typer.Option(help="Judge model.")] = None,
    judge_api_key_env: Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")] = "OPENAI_API_KEY",
    judge_max_calls: Annotated[Optional[int], typer.Option(help="Budget in judge calls.")] = None,
    judge_max_cost: Annotated[Optional[float], typer.Option(help="Budget in US dollars.")] = None,
    lake: LakeOpt = None,
) -> None:
    """Re-score stored runs with the current registry, without calling the target: unchanged work is
    kept (a cache hit), changed metrics get new rows under a new scoring id."""
    import datetime as dt

    from raglake.rescore import estimate_judge_calls, load_stored_run, plan_rescore, select_runs

    try:
        start = dt.date.fromisoformat(since) if since else None
        end = dt.date.fromisoformat(until) if until else None
    except ValueError as e:
        raise ConfigError(f"--since/--until take YYYY-MM-DD: {e}") from None
    judge = dict(base_url=judge_base_url, model=judge_model, api_key_env=judge_api_key_env, max_calls=judge_max_calls,
                 max_cost_usd=judge_max_cost) if judge_base_url or judge_model else None
    chosen = _split(metrics) or None
    q = LakeQueries(Lake(lake))
    run_ids = select_runs(q, runs, start, end, all_runs)
    if dry_run:
        from raglake.embed.prepare import needs_embedder, text_encoder
        from raglake.metrics.registry import get_metric, select_metrics
        from raglake.runplan import _judges

        judge_config = _judges(judge, None)[0]
        selected = select_metrics(chosen)
        for run_id in run_ids:
            stored = load_stored_run(q, run_id)
            key = text_encoder(embedder or stored.run_config.get("embedder_arg"), None).embedder.key \
                if needs_embedder(selected) else None
            decisions = plan_rescore(q, [run_id], selected, embedder_key=key,
                                     judge_model=judge_config.model if judge_config else None)
            todo = [get_metric(d.metric) for d in decisions if d.compute]
            render.console.print(render.rows_table([d.__dict__ for d in decisions if d.compute] or
                                                   [{"run_id": run_id, "metric": "(none)", "compute": False, "reason": "all unchanged"}],
                                                   f"run {run_id}: {len(todo)} to recompute, {len(decisions) - len(todo)} kept"))
            calls = estimate_judge_calls(stored, todo, judge_config, q.lake.url)
            render.console.print(f"judge calls: about {calls['calls']} ({calls['in_ledger']} already in the ledger, free)")
        return
    from flows.rescore import rescore as rescore_flow

    report = rescore_flow(run_ids=run_ids, metrics=chosen, lake=lake, embedder=embedder, judge=judge)
    for run_id, r in report["runs"].items():
        render.console.print(f"{run_id}: recomputed {r['recompute']} metric(s) ({r.get('rows', 0)} rows), "
                             f"kept {r['keep']} unchanged")


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
    from raglake.gate import evaluate_gate, load_rules

    gate_rules = load_rules(rules)
    q = LakeQueries(Lake(lake))
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


@app.command()
def health(
    run: Annotated[Optional[list[str]], typer.Option("--run", "-r", help="Run id, prefix or latest~N; repeatable.")] = None,
    by: Annotated[str, typer.Option(help=f"One of {', '.join(DIMENSIONS)}.")] = "all",
    lake: LakeOpt = None,
) -> None:
    """Capture failures by slice: error, timeout and empty-answer rates, and abstentions."""
    check_dimension(by)
    q = LakeQueries(Lake(lake))
    run_ids = q.run_ids(run or ["latest"])
    render.console.print(render.rows_table(q.capture_health(run_ids, by), f"capture health by {by}", 2000))


@app.command()
def coverage(
    run: Annotated[str, typer.Option("--run", "-r", help="Run id, prefix or latest~N.")] = "latest",
    lake: LakeOpt = None,
) -> None:
    """The index manifest of a run: docs and chunks processed, skipped (with reasons), tokens per chunk."""
    q = LakeQueries(Lake(lake))
    run_id = q.run_ids([run])[0]
    rows = q.coverage(run_id)
    if not rows:
        render.console.print(f"run {run_id} has no index manifest (its target, {q.target_name(run_id)}, exposes none)")
        return
    render.console.print(render.coverage_table(rows, f"index coverage · run {run_id} · index_version {rows[0]['index_version']}"))
    figures = [f for f in q.figures([run_id]) if f["metric"] in ("no_chunks_rate", "chunks_skipped_rate", "coverage_by_doc_type")]
    if figures:
        render.console.print(render.figures_table(figures, "coverage figures"))


@app.command()
def trend(
    metric: Annotated[Optional[str], typer.Option(help="One metric (default all).")] = None,
    target: Annotated[Optional[str], typer.Option(help="Only runs of this target.")] = None,
    by: Annotated[str, typer.Option(help="Slice dimension.")] = "all",
    lake: LakeOpt = None,
) -> None:
    """A metric over runs, oldest first."""
    rows = LakeQueries(Lake(lake)).trend(metric, target, None, by)
    render.console.print(render.rows_table(rows, "trend", 5000))


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A SELECT over the lake views (runs, cases, chunks, scores, scores_latest, labels, coverage, run_metrics, case_slices, metrics).")],
    lake: LakeOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines instead of a table.")] = False,
) -> None:
    """Run SQL over the lake and print the result."""
    table = run_sql(LakeQueries(Lake(lake)).con, query)
    if as_json:
        for row in table.to_pylist():
            print(json.dumps(row, default=str))
    else:
        render.console.print(render.arrow_table(table, max_rows=1000))


@app.command("import")
def import_cmd(
    source: Annotated[Path, typer.Argument(help="A seed-003 (question/reference_answer/answer/contexts) or RAGAS-style (user_input/retrieved_contexts/response/reference) file.")],
    out_dir: Annotated[Path, typer.Option(help="Where to write <name>.golden.jsonl and <name>.captures.jsonl.")] = Path("."),
) -> None:
    """Convert another tool's evaluation file into a raglake golden set plus replay captures."""
    from raglake.golden import load_golden, load_imported_captures

    golden = load_golden(source)
    captures = load_imported_captures(source)
    if captures is None:
        raise ConfigError(f"{source} is already in raglake's own shape; nothing to import")
    out_dir.mkdir(parents=True, exist_ok=True)
    golden_path, captures_path = out_dir / f"{source.stem}.golden.jsonl", out_dir / f"{source.stem}.captures.jsonl"
    golden_path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for c in golden.cases))
    captures_path.write_text("".join(c.model_dump_json(exclude_defaults=True) + "\n" for _, c in captures))
    render.console.print(f"{len(golden.cases)} cases → {golden_path}\n{len(captures)} captures → {captures_path}\n"
                         f"evaluate with: raglake run --golden {golden_path} --target replay:{captures_path}")


@app.command("serve-demo")
def serve_demo(
    port: Annotated[int, typer.Option(help="Port on the loopback interface.")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    corpus: Annotated[str, typer.Option(help="Notes folder the demo RAG indexes.")] = "data/corpus",
    embedder: Annotated[Optional[str], typer.Option(help="Embedder for the demo's index.")] = None,
    error_rate: Annotated[float, typer.Option(help="Share of questions answered with HTTP 500.")] = 0.0,
    timeout_rate: Annotated[float, typer.Option(help="Share of questions that hang for --hang-s.")] = 0.0,
    empty_rate: Annotated[float, typer.Option(help="Share of questions answered with an empty answer.")] = 0.0,
    malformed_rate: Annotated[float, typer.Option(help="Share of questions answered with broken JSON.")] = 0.0,
    flaky_rate: Annotated[float, typer.Option(help="Share of questions whose first attempt gets HTTP 503.")] = 0.0,
    latency_ms: Annotated[float, typer.Option(help="Latency added to every response.")] = 0.0,
    hang_s: Annotated[float, typer.Option(help="How long a 'timeout' question hangs.")] = 60.0,
    seed: Annotated[int, typer.Option(help="Which questions get which fault.")] = 0,
    lake: LakeOpt = None,
) -> None:
    """Serve the builtin reference RAG over HTTP (seed 001's debug API shape), with optional faults."""
    import uvicorn

    from raglake.demo.app import Faults, create_app
    from raglake.targets.builtin import BuiltinTarget

    try:
        faults = Faults(error_rate, timeout_rate, empty_rate, malformed_rate, flaky_rate, latency_ms, hang_s, seed)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    target = BuiltinTarget(corpus, Lake(lake).url, embedder)
    manifest = target.manifest()  # index before serving: the first request is not the slow one
    render.console.print(f"demo RAG over {corpus} ({manifest.chunks_embedded} chunks, index {manifest.index_version}) "
                         f"on http://{host}:{port}/debug/query — evaluate it with: "
                         f"raglake run --target http:data/targets/demo.yaml")
    uvicorn.run(create_app(target, faults), host=host, port=port, log_level="warning")


@app.command("metrics")
def metrics_cmd(markdown: Annotated[bool, typer.Option("--markdown", help="The docs table, as markdown.")] = False) -> None:
    """List the metric registry."""
    from raglake.docs import metrics_markdown

    if markdown:
        print(metrics_markdown())
        return
    render.console.print(render.rows_table([m.as_row() for m in all_metrics()], "metrics", 500))


def main() -> None:
    # raglake runs offline by default: Prefect's ephemeral server must not try to phone home, and on a
    # busy 2-core machine it may need more than Prefect's default 20 s to start
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    try:
        app()
    except RaglakeError as e:
        render.console.print(f"[bold red]error:[/] {e}", highlight=False)
        sys.exit(2)
