"""The names of the flow runs in Prefect's API and UI: the raglake run id, not a random pair of words."""

from __future__ import annotations

from typing import Any

from prefect.context import FlowRunContext


def _settings_field(name: str) -> Any:
    """A field of the running flow's `settings` parameter (a model, or a deployment's plain dict)."""
    context = FlowRunContext.get()
    settings = (context.parameters or {}).get("settings") if context is not None else None
    return settings.get(name) if isinstance(settings, dict) else getattr(settings, name, None)


def evaluate_run_name() -> str:
    """The `evaluate` flow run's name: the raglake run id, when the settings fix it (the command line
    and the Python API do); otherwise the flow names its run once the plan has made the id."""
    return _settings_field("run_id") or "evaluate"


def rescore_run_name(run_ids: list[str] | None = None) -> str:
    """The `rescore` flow run's name: the raglake run ids it re-scores (the first three, and how many more)."""
    ids = run_ids if run_ids is not None else (_settings_field("run_ids") or [])
    if not ids:
        return "rescore"
    more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
    return f"rescore {' '.join(ids[:3])}{more}"


def name_flow_run(name: str) -> None:
    """Rename the running flow run (when its name is not `name` yet)."""
    context = FlowRunContext.get()
    if context is None or context.flow_run is None or context.flow_run.name == name:
        return
    context.client.set_flow_run_name(flow_run_id=context.flow_run.id, name=name)
    context.flow_run.name = name
