"""Tools around the lake: import captures, serve the demo RAG, list the metric registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake import outputs
from raglake.cli import options as opt
from raglake.cli import render
from raglake.cli.common import (
    LakeOpt,
    app,
)
from raglake.config.evalfile import find_eval_file, load_eval_file
from raglake.docs import metrics_markdown, own_metrics_markdown
from raglake.errors import ConfigError
from raglake.golden import ANSWERS, CONTEXTS, OWN, load_golden, load_imported_captures, what_it_holds
from raglake.lake.store import Lake
from raglake.metrics.conformance import check_metric
from raglake.metrics.plugins import load_entry_points, load_plugins
from raglake.metrics.registry import all_metrics
from raglake.pipeline.scoring import score_context
from raglake.targets.builtin import BuiltinTarget


@app.command("import")
def import_cmd(
    source: Annotated[
        Path,
        typer.Argument(
            help="A file of question/answer/contexts/reference records, or RAGAS' "
            "(user_input/retrieved_contexts/response/reference): JSONL, JSON, YAML or CSV (list columns as JSON "
            "or Python-repr strings, as pandas writes them)."
        ),
    ],
    out_dir: Annotated[Path, typer.Option(help="Where to write <name>.golden.jsonl and <name>.captures.jsonl.")] = Path(
        "."
    ),
) -> None:
    """Convert another tool's evaluation file into a raglake golden set plus replay captures."""
    golden = load_golden(source)
    held = what_it_holds(source)
    if held == OWN:
        raise ConfigError(f"{source} is already in raglake's own shape; nothing to import")
    # no answer anywhere: captures of empty answers would be scored as such, so the golden set alone is written
    captures = load_imported_captures(source) if held == ANSWERS else None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the folder {out_dir}: {e.strerror or e}") from None
    golden_path, captures_path = out_dir / f"{source.stem}.golden.jsonl", out_dir / f"{source.stem}.captures.jsonl"
    written = ((golden_path, "the golden set"), (captures_path, "the captures"))[: 2 if captures is not None else 1]
    for path, what in written:
        outputs.check_target(path, what)  # both, before either is written
    with outputs.writing(golden_path, "the golden set") as f:
        f.writelines(c.model_dump_json(exclude_defaults=True) + "\n" for c in golden.cases)
    if captures is None:
        unused = " (its retrieved contexts are not imported: there are no answers to go with them)"
        render.console.print(
            f"{len(golden.cases)} cases → {golden_path}\n{source} holds no answers{unused if held == CONTEXTS else ''}"
            f": no captures written\nevaluate with a system that answers: raglake run --golden {golden_path} "
            "--target http:my_service.yaml (or builtin:NOTES_FOLDER)",
            markup=False,
            soft_wrap=True,
        )
        return
    with outputs.writing(captures_path, "the captures") as f:
        f.writelines(c.model_dump_json(exclude_defaults=True) + "\n" for _, c in captures)
    render.console.print(
        f"{len(golden.cases)} cases → {golden_path}\n{len(captures)} captures → {captures_path}\n"
        f"evaluate with: raglake run --golden {golden_path} --target replay:{captures_path}"
    )


QUESTIONS = "data/golden/sample.jsonl"  # serve-demo's --questions (without it there, the rates are probabilities)
SHARE = (
    "The golden set whose questions the demo expects: each rate is an exact share of them, round(rate × N) of the "
    "N questions (halves up), which ones chosen by --seed. Any other question gets each fault with its rate as a "
    "probability."
)


@app.command("serve-demo")
def serve_demo(
    port: Annotated[int, typer.Option(help="Port on the loopback interface.")] = 8765,
    host: Annotated[str, typer.Option(help="Address to bind (loopback by default).")] = "127.0.0.1",
    corpus: Annotated[str, typer.Option(help="Notes folder the demo RAG indexes.")] = "data/corpus",
    embedder: Annotated[Optional[str], typer.Option(help="Embedder for the demo's index.")] = None,
    error_rate: Annotated[float, typer.Option(help="Share of the questions answered HTTP 500, every attempt.")] = 0.0,
    timeout_rate: Annotated[
        float, typer.Option(help="Share of the questions that hang --hang-s, every attempt.")
    ] = 0.0,
    empty_rate: Annotated[float, typer.Option(help="Share of the questions answered empty, every attempt.")] = 0.0,
    malformed_rate: Annotated[float, typer.Option(help="Share of the questions answered with broken JSON.")] = 0.0,
    flaky_rate: Annotated[float, typer.Option(help="Share of the questions whose first attempt only gets 503.")] = 0.0,
    latency_ms: Annotated[float, typer.Option(help="Latency added to every response.")] = 0.0,
    hang_s: Annotated[float, typer.Option(help="How long a 'timeout' question hangs.")] = 60.0,
    seed: Annotated[int, typer.Option(help="Which questions get which fault.")] = 0,
    questions: Annotated[str, typer.Option(help=SHARE)] = QUESTIONS,
    lake: LakeOpt = None,
) -> None:
    """Serve the builtin reference RAG over HTTP (POST /debug/query, GET /debug/index), with optional faults: a
    rate is an exact share of the questions of --questions."""
    import uvicorn  # the web server and the demo app (FastAPI): only for this command

    from raglake.demo.app import Faults, create_app

    given = Path(questions).is_file() or questions != QUESTIONS  # the default may be absent: then by chance
    expected = tuple(c.question for c in load_golden(questions).cases) if given else ()
    rates = (error_rate, timeout_rate, empty_rate, malformed_rate, flaky_rate)
    try:
        faults = Faults(*rates, latency_ms, hang_s, seed, questions=expected)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    target = BuiltinTarget(corpus, Lake(lake).url, embedder)
    manifest = target.manifest()  # index before serving: the first request is not the slow one
    render.console.print(
        f"demo RAG over {corpus} ({manifest.chunks_embedded} chunks, index {manifest.index_version}) "
        f"on http://{host}:{port}/debug/query — evaluate it with: "
        f"raglake run --target http:data/targets/demo.yaml"
    )
    said = faults.summary(questions)
    if said:
        render.console.print(said, highlight=False, markup=False)
    uvicorn.run(create_app(target, faults), host=host, port=port, log_level="warning")


@app.command("metrics")
def metrics_cmd(
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="The docs table of raglake's built-in metrics, as markdown; where an eval file (raglake.yaml "
            "here, or -c) or --plugin names metrics of your own, a second table of yours after it.",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Run the registry's conformance checks on your own metrics (plugins, installed packages); "
            "one line per metric, exit 1 on a problem.",
        ),
    ] = False,
    plugin: Annotated[
        Optional[list[str]],
        typer.Option("--plugin", help="A Python file (or module name) of your @raglake.metric metrics; repeatable."),
    ] = None,
    config: opt.Config = None,
    long: Annotated[
        bool, typer.Option("--long", help="Every column (description, inputs, seed, …), wrapped to the terminal.")
    ] = False,
) -> None:
    """List the metric registry: raglake's metrics and your own, with where each is defined (origin, source)."""
    found = find_eval_file(config)  # the eval file's own metrics, rubrics and assertions (raglake.yaml or -c)
    if markdown and not plugin and found is None:  # raglake's docs (docs/metric-table.md): built-in metrics only
        print(metrics_markdown())
        return
    load_entry_points()
    load_plugins(plugin or [], ".")
    if found is not None:
        load_eval_file(found).extensions().activate()
    if markdown:  # raglake's table as the docs hold it, then the user's own
        own = own_metrics_markdown([m for m in all_metrics() if not m.builtin and m.origin != "variant"])
        print(metrics_markdown() + (f"\n\n{own}" if own else ""))
        return
    if check:
        raise typer.Exit(check_own_metrics())
    if long:
        render.console.print(render.rows_table([m.as_row() for m in all_metrics()], "metrics", 500))
        return
    render.console.print(render.metrics_table(all_metrics()))


def check_own_metrics() -> int:
    """raglake.metrics.conformance on every case-level metric not built in (a judge rubric is not run: it
    needs a judge); one line each; 1 on a problem, or when there is no metric of one's own at all."""
    own = [m for m in all_metrics(level="case") if not m.builtin]
    if not own:
        print(
            "no metric of your own to check: name a plugin (--plugin FILE) or install a package with "
            "raglake.metrics entry points"
        )
        return 1
    width = max(len(m.name) for m in own)
    failed = 0
    for m in own:
        where = f"{m.origin} {m.source or ''}".strip()
        if m.steps:
            print(f"skip  {m.name:<{width}}  {where}: a judge metric (the check does not call a judge)")
            continue
        found = check_metric(m, lambda ctx, metric: score_context(ctx, [metric])[0][1])
        if found.ok:
            notes = f" (note: {'; '.join(found.notes)})" if found.notes else ""
            print(f"ok    {m.name:<{width}}  {where}{notes}")
            continue
        failed += 1
        more = f" (and {len(found.problems) - 1} more)" if len(found.problems) > 1 else ""
        print(f"FAIL  {m.name:<{width}}  {where}: {found.problems[0]}{more}")
    return 1 if failed else 0
