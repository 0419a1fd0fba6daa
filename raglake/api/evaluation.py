"""What `raglake.evaluate(...)` (raglake.api.run) does: one evaluation from Python, through the same front door
(raglake.config.front: eval file + overrides -> RunSettings), plan, `evaluate` flow, checks and Prefect settings
as `raglake run`, returning a Result. This module does not import Prefect: Prefect's temporary server is
launched once the inputs are checked (raglake.prefect_server), and raglake.api.flowrun, which imports Prefect
and the flows, is imported while it starts."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from raglake import prefect_server, prefect_settings
from raglake.api.inputs import inputs_for
from raglake.api.result import Result
from raglake.config.front import resolve
from raglake.embed import process
from raglake.errors import ConfigError
from raglake.lake.checks import check_lake_root
from raglake.pipeline.embedding import embeds_packaged_on_cpu, load_embedder_early
from raglake.pipeline.orchestration import needs_prefect
from raglake.pipeline.plan import RunPlan, plan_run
from raglake.pipeline.settings import JudgeSettings

_session: dict[str, str] = {}


def session_lake() -> str:
    """The lake of this process's evaluations when none is given: a temporary folder, shared by every
    call (so two results can be compared) and removed when the process ends."""
    if "lake" not in _session:
        folder = tempfile.mkdtemp(prefix="raglake-lake-")
        atexit.register(shutil.rmtree, folder, True)
        _session["lake"] = str(Path(folder) / "lake")
    return _session["lake"]


def evaluate_now(call: Mapping[str, Any]) -> Result | list[Result]:
    """raglake.api.run.evaluate's work, once the model's process is on its way: `call` holds that function's
    arguments by name (`options`: its **options)."""
    data, golden, target, metrics = call["data"], call["golden"], call["target"], call["metrics"]
    lake, judge, options = call["lake"], call["judge"], call["options"]
    prefect_settings.apply(verbose=call["verbose"])  # the CLI's Prefect settings: start-up time-out, telemetry off
    inputs = inputs_for(data, golden, call["name"], call["extra_columns"])
    if inputs.target and target:
        inputs.close()
        raise ConfigError("the data holds the answers already: leave out target, or drop the answer columns")
    try:
        overrides = {
            **options,
            "golden": str(inputs.golden or golden) if (inputs.golden or golden) else None,
            "target": inputs.target or target,
            "metrics": [m.strip() for m in metrics.split(",")] if isinstance(metrics, str) else metrics,
            "lake": str(lake) if lake is not None else None,
            "judge": JudgeSettings.of(judge.model_dump() if isinstance(judge, JudgeSettings) else judge),
        }
        plans = _plans(call["config"], overrides, rows_without_answers=inputs.needs_target)
        results = [Result(run_id, plans[0].lake.url) for run_id in _run(plans, call["show_progress"])]
        return results[0] if len(results) == 1 else results
    finally:
        inputs.close()


def _plans(config: Any, overrides: dict[str, Any], *, rows_without_answers: bool) -> list[RunPlan]:
    """The runs' plans, every input checked (as `raglake run` does before Prefect starts); no lake given
    anywhere: this process's temporary lake. Rows without answers need a target (target= or the eval file's)."""
    evaluation = resolve(config, overrides, discover=False)
    named = overrides.get("target") or (
        evaluation.file and (evaluation.file.values.get("targets") or evaluation.file.values.get("target"))
    )
    if rows_without_answers and not named:
        raise ConfigError("these rows hold no answers: give target= (e.g. 'http:my_service.yaml' or 'builtin:DIR')")
    for note in evaluation.notes:  # raglake.evaluate -> evaluate_now -> _plans: the warning names the user's line
        warnings.warn(note, UserWarning, stacklevel=4)
    runs = evaluation.runs
    runs = [r if r.lake is not None else r.model_copy(update={"lake": session_lake()}) for r in runs]
    check_lake_root(runs[0].lake, write=True)  # a file, a device or a read-only folder: a LakeError before any work
    return [plan_run(r) for r in runs]


def _run(plans: list[RunPlan], show_progress: bool) -> list[str]:
    """The `evaluate` flow of each plan (raglake.api.flowrun); Prefect's temporary server and the embedder
    start first, in the background, while Prefect and the flows are imported (issue 29's cold start)."""
    if not any(embeds_packaged_on_cpu(p.metrics, p.embedder, p.device) for p in plans):
        process.discard_early()  # raglake.api.run started the packaged model's process: no run here takes it
    prefect = needs_prefect(plans)  # decided once, before the launch sets PREFECT_API_URL
    if prefect:
        prefect_server.launch_early()
    try:
        for p in plans:  # warmed up only while a server start hides it
            load_embedder_early(p.metrics, p.embedder, p.device, warm=prefect)
        from raglake.api import flowrun  # here: the flows (Prefect when a run needs it) import while the server starts

        return flowrun.run_plans(plans, show_progress)
    finally:
        prefect_server.discard_early()  # a launch start_api did not adopt (an error before it)
