"""The Prefect side of the command line and the Python API: Prefect's API for this process
(raglake.flows.runtime) and the flows. Imported only when a run needs Prefect (raglake.pipeline.orchestration):
a run in this process never loads Prefect."""

from __future__ import annotations

from raglake.flows.evaluate import evaluate
from raglake.flows.metaeval import metaeval
from raglake.flows.rescore import rescore
from raglake.flows.runtime import start_api, stop_api

__all__ = ["evaluate", "metaeval", "rescore", "start_api", "stop_api"]
