"""Serve the nightly `evaluate` and the on-demand `rescore` deployments from one process, with no
work pool: `python deployments/serve.py` (from the repository root). Their parameters are those of
prefect.yaml, read from it, so the two ways of deploying cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import yaml


def deployments() -> list:
    """The deployments of prefect.yaml as `flow.to_deployment(...)` objects."""
    from raglake.flows.evaluate import evaluate
    from raglake.flows.evaluation import evaluation
    from raglake.flows.rescore import rescore

    flows = {
        "raglake.flows.evaluation:evaluation": evaluation,
        "raglake.flows.evaluate:evaluate": evaluate,
        "raglake.flows.rescore:rescore": rescore,
    }
    spec = yaml.safe_load((Path(__file__).parent / "prefect.yaml").read_text())
    out = []
    for d in spec["deployments"]:
        cron = next((s["cron"] for s in d.get("schedules", []) if "cron" in s), None)
        out.append(
            flows[d["entrypoint"]].to_deployment(
                name=d["name"], description=d.get("description"), parameters=d.get("parameters", {}), cron=cron
            )
        )
    return out


if __name__ == "__main__":
    from prefect import serve

    serve(*deployments())
