"""The options of `raglake run` as named types, so the command's signature reads as a list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

Config = Annotated[
    Optional[Path],
    typer.Option(
        "--config",
        "-c",
        help="Eval file (YAML) describing the evaluation (default: raglake.yaml in the working folder, if any).",
    ),
]
Targets = Annotated[
    Optional[list[str]],
    typer.Option(
        "--target",
        "-t",
        help="builtin[:CORPUS_DIR], http:CONFIG.yaml, replay:FILE or replay-run:RUN_ID; repeat to compare several. "
        "Default: the eval file's targets, else the golden file itself when it holds another tool's answers, else "
        "builtin over the sample corpus.",
    ),
]
Judge = Annotated[
    Optional[str],
    typer.Option("--judge", help="'local': start the bundled llama.cpp judge (extra local-judge) for the run."),
]
Device = Annotated[
    str,
    typer.Option(
        help="Where the embedder runs: auto (cuda, else mps, when torch sees one, else cpu), cpu, cuda or mps."
    ),
]
JudgeApiKeyEnv = Annotated[str, typer.Option(help="Environment variable holding the judge's API key.")]
JudgeConcurrency = Annotated[int, typer.Option(help="Judge calls in flight at once.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show Prefect's flow and task logs (and Dask's).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]
