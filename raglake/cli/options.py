"""The options of `raglake run` as named types, so the command's signature reads as a list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Golden = Annotated[Optional[Path], typer.Option(help="Golden set (JSONL, JSON or YAML). Default: the bundled sample.")]
Targets = Annotated[
    Optional[list[str]],
    typer.Option(
        "--target",
        "-t",
        help="builtin[:CORPUS_DIR], http:CONFIG.yaml, replay:FILE or replay-run:RUN_ID; repeat to compare several. "
        "Default: builtin over the sample corpus.",
    ),
]
K = Annotated[int, typer.Option(help="Top-K cut-off for retrieval metrics.")]
RunId = Annotated[Optional[str], typer.Option(help="Run id to use (one target only).")]
Labels = Annotated[
    Optional[Path], typer.Option(help="Human label annotation file (JSONL of {case_id, chunks, answers}).")
]
Metrics = Annotated[
    Optional[list[str]], typer.Option("--metrics", "-m", help="Only these case-level metrics (comma-separated).")
]
RequireSnippets = Annotated[bool, typer.Option(help="A chunk matches a support only if it holds one of its snippets.")]
BatchSize = Annotated[
    Optional[int],
    typer.Option(help="Cases per capture/scoring task (default: the run's cases / 20, between 100 and 5,000)."),
]
Embedder = Annotated[
    Optional[str], typer.Option(help="Sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2).")
]
Device = Annotated[
    str,
    typer.Option(
        help="Where the embedder runs: auto (cuda, else mps, when torch sees one, else cpu), cpu, cuda or mps."
    ),
]
ThetaS = Annotated[float, typer.Option(help="context_sufficiency threshold θs (cosine).")]
ThetaH = Annotated[
    float, typer.Option(help="answer_hallucination threshold θh: a sentence is unsupported when its support < θh.")
]
BertscoreLayer = Annotated[Optional[int], typer.Option(help="BERTScore hidden layer (default: the model's last).")]
BertscoreIdf = Annotated[bool, typer.Option(help="Weight BERTScore tokens by idf over the run's references.")]
Judge = Annotated[
    Optional[str],
    typer.Option("--judge", help="'local': start the bundled llama.cpp judge (extra local-judge) for the run."),
]
JudgeBaseUrl = Annotated[
    Optional[str],
    typer.Option(help="OpenAI-compatible base URL of the judge (OpenAI, Azure, vLLM, Ollama, llama.cpp)."),
]
JudgeModel = Annotated[Optional[str], typer.Option(help="Judge model name.")]
JudgeApiKeyEnv = Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")]
JudgeConcurrency = Annotated[int, typer.Option(help="Judge calls in flight at once.")]
JudgeRpm = Annotated[Optional[int], typer.Option(help="Judge requests per minute at most.")]
JudgeTpm = Annotated[Optional[int], typer.Option(help="Judge tokens per minute at most (estimated).")]
JudgeTimeout = Annotated[float, typer.Option(help="Seconds per judge call.")]
JudgeMaxCalls = Annotated[
    Optional[int], typer.Option(help="Budget: stop judging after this many calls (the rest: skipped, reason budget).")
]
JudgeMaxCost = Annotated[Optional[float], typer.Option(help="Budget: stop judging after this many US dollars.")]
SpotCheckModel = Annotated[Optional[str], typer.Option(help="Second judge model for the reliability spot-check.")]
SpotCheckBaseUrl = Annotated[Optional[str], typer.Option(help="Its base URL (default: the judge's).")]
SpotCheckVariant = Annotated[
    bool,
    typer.Option(
        "--spot-check-variant",
        help="Spot-check by asking the prompts' variant wording (judge/prompts/variants), with the judge's model "
        "unless --spot-check-model names another.",
    ),
]
SpotCheckShare = Annotated[float, typer.Option(help="Share of cases judged again.")]
SpotCheckMin = Annotated[int, typer.Option(help="At least this many cases judged again.")]
Runner = Annotated[
    str,
    typer.Option(
        help="Where scoring batches run: thread, or dask[:ADDRESS] (prefect-dask; a 2-worker LocalCluster without "
        "ADDRESS)."
    ),
]
Results = Annotated[
    Optional[str],
    typer.Option(
        help="Prefect's task-result store: a folder or an fsspec URL (default $RAGLAKE_RESULTS or <lake>/_results)."
    ),
]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's flow and task logs (and Dask's).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
