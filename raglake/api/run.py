"""`raglake.evaluate(...)`: one evaluation run from Python, through the same `evaluate` flow, checks and
Prefect settings as `raglake run`, returning a Result."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from raglake import prefect_settings, progress
from raglake.api.inputs import inputs_for
from raglake.api.result import Result
from raglake.errors import ConfigError, UnknownNameError
from raglake.flows import runtime
from raglake.flows.evaluate import evaluate as evaluate_flow
from raglake.judge.local import LOCAL_MODEL, LocalJudgeServer
from raglake.lake.checks import check_lake_root
from raglake.lake.store import Lake
from raglake.pipeline.embedding import load_embedder_early
from raglake.pipeline.plan import CHECKED, DEFAULT_TARGET, SAMPLE_GOLDEN, plan_run
from raglake.pipeline.settings import JudgeSettings, RunSettings, ScoringSettings, build

SCORING_OPTIONS = tuple(f for f in ScoringSettings.model_fields if f not in ("wp_weights", "ragas_weights"))
OPTIONS = tuple(f for f in RunSettings.model_fields if f not in ("golden", "target", "judge")) + SCORING_OPTIONS
LOCAL_JUDGE = dict(base_url="http://127.0.0.1:1/v1", model=LOCAL_MODEL, label="local")  # its port: once started
_session: dict[str, str] = {}


def session_lake() -> str:
    """The lake of this process's evaluations when none is given: a temporary folder, shared by every
    call (so two results can be compared) and removed when the process ends."""
    if "lake" not in _session:
        folder = tempfile.mkdtemp(prefix="raglake-lake-")
        atexit.register(shutil.rmtree, folder, True)
        _session["lake"] = str(Path(folder) / "lake")
    return _session["lake"]


def evaluate(
    data: Any = None,
    *,
    golden: str | Path | None = None,
    target: str | None = None,
    metrics: str | Sequence[str] | None = None,
    k: int = 5,
    lake: str | Path | None = None,
    judge: str | Mapping[str, Any] | JudgeSettings | None = None,
    name: str = "dataframe",
    extra_columns: Sequence[str] = (),
    verbose: bool = False,
    show_progress: bool = False,
    **options: Any,
) -> Result:
    """Evaluate and land one run; returns its Result.

    `data`: a pandas DataFrame, a dict of columns or a list of rows (question, answer, contexts,
    reference, id, category, tags, …; RAGAS' user_input, response, retrieved_contexts, reference as
    they are), or the path of a golden set (or of another tool's file that holds the answers). Rows
    with answers are evaluated as they are; rows without need a `target`. Without data: `golden`
    (default the bundled sample) against `target` (default the builtin RAG), as `raglake run`.
    `lake`: default a temporary lake shared by this process's calls. `judge`: None, "local" or
    {"base_url": …, "model": …, …} (the fields of `raglake run`'s --judge-* options). `name` labels
    the run's target and dataset when the data is rows. `extra_columns`: columns of the rows to keep in
    the cases' metadata although their names are close to one raglake reads (else "did you mean"; a column
    named meta_* is kept too). Other options: `raglake run`'s, by their
    field names (run_id, labels, require_snippets, batch_size, embedder, device, runner, results,
    theta_s, theta_h, bertscore_layer, bertscore_idf, spot_check)."""
    prefect_settings.apply(verbose=verbose)  # the CLI's Prefect settings: start-up time-out, telemetry off
    unknown = [key for key in options if key not in OPTIONS]
    if unknown:
        raise UnknownNameError("evaluate() option", unknown[0], OPTIONS)
    inputs = inputs_for(data, golden, name, extra_columns)
    if inputs.target and target:
        inputs.close()
        raise ConfigError("the data holds the answers already: leave out target, or drop the answer columns")
    if inputs.folder is not None and not (inputs.target or target):
        inputs.close()
        raise ConfigError("these rows hold no answers: give target= (e.g. 'http:my_service.yaml' or 'builtin:DIR')")
    try:
        settings = _settings(inputs.golden or SAMPLE_GOLDEN, inputs.target or target, metrics, k, lake, judge, options)
        return Result(_run(settings, show_progress), Lake(settings.lake).url)
    finally:
        CHECKED.clear()
        inputs.close()


def _settings(
    golden: str, target: str | None, metrics: Any, k: int, lake: Any, judge: Any, options: dict[str, Any]
) -> RunSettings:
    """The run's settings, checked and its inputs loaded (as `raglake run` does before Prefect starts)."""
    scoring = {**(options.pop("scoring", None) or {}), **{k: options.pop(k) for k in SCORING_OPTIONS if k in options}}
    if lake is not None:
        check_lake_root(lake, write=True)  # a file, a device or a read-only folder: a LakeError before any work
    settings = build(
        RunSettings,
        **options,
        golden=str(golden),
        target=target or DEFAULT_TARGET,
        k=k,
        lake=str(lake) if lake is not None else session_lake(),
        metrics=[m.strip() for m in metrics.split(",")] if isinstance(metrics, str) else metrics,
        judge=_judge(judge),
        scoring=scoring,
    )
    return settings.model_copy(update={"run_id": plan_run(settings, CHECKED, keep=True).run_id})


def _judge(judge: Any) -> dict[str, Any] | None:
    if judge is None:
        return None
    if judge == "local":
        return dict(LOCAL_JUDGE)
    if isinstance(judge, JudgeSettings):
        return judge.model_dump()
    if isinstance(judge, Mapping):
        return dict(judge)
    raise ConfigError(f"judge takes None, 'local' or a mapping such as {{'base_url': …, 'model': …}}; got {judge!r}")


def _run(settings: RunSettings, show_progress: bool) -> str:
    """The `evaluate` flow on Prefect's API (started first: a clear error when it cannot start); the
    embedder loads meanwhile (raglake.pipeline.embedding.load_embedder_early)."""
    load_embedder_early(settings.metrics, settings.embedder, settings.device)
    runtime.start_api()
    with _judge_endpoint(settings) as run, progress.reporting(Console(stderr=True), show_progress):
        return evaluate_flow(run)


@contextlib.contextmanager
def _judge_endpoint(settings: RunSettings) -> Iterator[RunSettings]:
    """The settings with the local judge's server started for the run (and stopped after it)."""
    judge = settings.judge
    if judge is None or judge.label != "local":
        yield settings
        return
    with LocalJudgeServer() as server:  # one request at a time on a CPU: more would only time out
        local = judge.model_copy(
            update=dict(base_url=server.base_url, concurrency=1, timeout_s=max(judge.timeout_s, 600))
        )
        yield settings.model_copy(update={"judge": local})
