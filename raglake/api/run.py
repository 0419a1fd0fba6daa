"""`raglake.evaluate(...)`: one evaluation from Python (raglake.api.evaluation does the work). This module is
light on purpose: before the API's own imports (~0.9 s cold: numpy, pyarrow, DuckDB, pydantic, pandas), a call
that may embed with the packaged model on the cpu starts that model's process (raglake.embed.process), so that
torch's import there (~1 s) runs beside them instead of after them (issue 29's cold start). A run that turns
out not to take it stops it as soon as its plan says so, and at the latest when the call returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raglake.embed import process
from raglake.embed.model import is_packaged, resolve_device, resolve_embedder_path

if TYPE_CHECKING:
    from raglake.api.result import Result
    from raglake.pipeline.settings import JudgeSettings


def evaluate(
    data: Any = None,
    *,
    config: str | Path | Mapping[str, Any] | None = None,
    golden: str | Path | None = None,
    target: str | None = None,
    metrics: str | Sequence[str] | None = None,
    lake: str | Path | None = None,
    judge: str | Mapping[str, Any] | JudgeSettings | None = None,
    name: str = "dataframe",
    extra_columns: Sequence[str] = (),
    verbose: bool = False,
    show_progress: bool = False,
    **options: Any,
) -> Result | list[Result]:
    """Evaluate and land the run(s); returns the Result (a list of them when the eval file has several targets).

    `data`: a pandas DataFrame, a dict of columns or a list of rows (question, answer, contexts,
    reference, id, category, tags, …; RAGAS' user_input, response, retrieved_contexts, reference as
    they are), or the path of a golden set (or of another tool's file that holds the answers). Rows
    with answers are evaluated as they are; rows without need a `target`. `config`: an eval file's path or
    its content as a dict (what `raglake run -c FILE` reads); the other arguments override its fields.
    Without data or config: `golden` (default the bundled sample) against `target` (default the builtin
    RAG), as `raglake run`. `lake`: default the eval file's, else a temporary lake shared by this
    process's calls. `judge`: None, "local" or {"base_url": …, "model": …, …} (the judge's fields).
    `name` labels the run's target and dataset when the data is rows. `extra_columns`: columns of the rows
    to keep in the cases' metadata although their names are close to one raglake reads (else "did you
    mean"; a column named meta_* is kept too). Other options: RunSettings' fields by name (k, run_id,
    labels, require_snippets, batch_size, embedder, device, runner, results, theta_s, theta_h,
    bertscore_layer, bertscore_idf, spot_check, judge_model, …), as `raglake run`'s options name them."""
    call = dict(locals())  # the arguments, by name (raglake.api.evaluation reads them)
    _start_model_early(options.get("embedder"), options.get("device", "auto"))
    try:
        from raglake.api import evaluation  # the API's imports, while the model's process starts

        return evaluation.evaluate_now(call)
    finally:
        process.discard_early()


_guessed: list[bool] = []  # whether a call of this process has started the model's process on a guess


def _start_model_early(embedder: object, device: object) -> None:
    """Start the packaged model's process where this call would run that model on the cpu, unless its
    arguments say otherwise (another embedder or device; an eval file may still: then the plan stops it).
    On a guess, so once per process: it is what a cold first call waits for, and a session of calls that do
    not embed should not start one each time (a later call that embeds starts it at its plan, as the
    command line does). A wrong RAGLAKE_MODEL_PROCESS is a ConfigError here, as it would be when the model loads."""
    if _guessed or not is_packaged(embedder) or device not in ("auto", "cpu"):
        return
    _guessed.append(True)
    if resolve_device(str(device)) == "cpu":
        process.start_early(resolve_embedder_path(None)[1])
