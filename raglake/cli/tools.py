"""Tools around the lake: import captures, serve the demo RAG, list the metric registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from raglake import outputs
from raglake.cli import render
from raglake.cli.common import (
    LakeOpt,
    app,
)
from raglake.docs import metrics_markdown
from raglake.errors import ConfigError
from raglake.golden import load_golden, load_imported_captures
from raglake.lake.store import Lake
from raglake.metrics.registry import all_metrics
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
    captures = load_imported_captures(source)
    if captures is None:
        raise ConfigError(f"{source} is already in raglake's own shape; nothing to import")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the folder {out_dir}: {e.strerror or e}") from None
    golden_path, captures_path = out_dir / f"{source.stem}.golden.jsonl", out_dir / f"{source.stem}.captures.jsonl"
    for path, what in ((golden_path, "the golden set"), (captures_path, "the captures")):
        outputs.check_target(path, what)  # both, before either is written
    with outputs.writing(golden_path, "the golden set") as f:
        f.writelines(c.model_dump_json(exclude_defaults=True) + "\n" for c in golden.cases)
    with outputs.writing(captures_path, "the captures") as f:
        f.writelines(c.model_dump_json(exclude_defaults=True) + "\n" for _, c in captures)
    render.console.print(
        f"{len(golden.cases)} cases → {golden_path}\n{len(captures)} captures → {captures_path}\n"
        f"evaluate with: raglake run --golden {golden_path} --target replay:{captures_path}"
    )


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
    """Serve the builtin reference RAG over HTTP (POST /debug/query, GET /debug/index), with optional faults."""
    import uvicorn  # the web server and the demo app (FastAPI): only for this command

    from raglake.demo.app import Faults, create_app

    try:
        faults = Faults(error_rate, timeout_rate, empty_rate, malformed_rate, flaky_rate, latency_ms, hang_s, seed)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    target = BuiltinTarget(corpus, Lake(lake).url, embedder)
    manifest = target.manifest()  # index before serving: the first request is not the slow one
    render.console.print(
        f"demo RAG over {corpus} ({manifest.chunks_embedded} chunks, index {manifest.index_version}) "
        f"on http://{host}:{port}/debug/query — evaluate it with: "
        f"raglake run --target http:data/targets/demo.yaml"
    )
    uvicorn.run(create_app(target, faults), host=host, port=port, log_level="warning")


@app.command("metrics")
def metrics_cmd(
    markdown: Annotated[bool, typer.Option("--markdown", help="The docs table, as markdown.")] = False,
) -> None:
    """List the metric registry."""
    if markdown:
        print(metrics_markdown())
        return
    render.console.print(render.rows_table([m.as_row() for m in all_metrics()], "metrics", 500))
