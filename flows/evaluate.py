"""The `evaluate` flow: raglake.flows.evaluate_body's body inside a Prefect flow run, its tasks as Prefect
task runs (raglake.tasks.on_prefect), its run named after the run id and summarised as artifacts."""

from __future__ import annotations

import re

from prefect import flow
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from raglake.analysis import LakeQueries
from raglake.flows import names
from raglake.flows.evaluate_body import FLOW_THREADS, FlowRunHooks, evaluate_in_process, evaluate_run
from raglake.pipeline.lakes import after_run
from raglake.pipeline.local_judge import local_judge
from raglake.pipeline.settings import RunSettings
from raglake.report.artifacts import summary_markdown, summary_table
from raglake.tasks import engine
from raglake.tasks.on_prefect import PREFECT_TASKS


@flow(
    name="evaluate",
    flow_run_name=names.evaluate_run_name,
    task_runner=ThreadPoolTaskRunner(max_workers=FLOW_THREADS),
)
def evaluate(settings: RunSettings) -> str:
    """Evaluate one target on one golden set and land the run; returns the run id.

    `settings.runner`: where scoring batches run, `thread` or `dask[:ADDRESS]` (see raglake.pipeline.runners).
    The local judge is started here when no caller did (a deployment's run)."""
    with local_judge(settings.judge) as judge:
        settings = settings if judge is settings.judge else settings.model_copy(update={"judge": judge})
        return evaluate_run(settings, FlowRunHooks(names.name_flow_run, _publish))


@engine.task(name="publish-summary")
def publish_summary(lake_url: str, run_id: str) -> None:
    """The run as Prefect artifacts: a markdown summary (against the previous run of the same target
    and golden set, when there is one) and a table of the headline metrics with n and 95% CIs."""

    def summaries(q: LakeQueries) -> tuple[str, list[dict], str]:
        key = re.sub(r"[^a-z0-9-]", "-", q.target_name(run_id).lower())[:40].strip("-") or "run"
        table = summary_table(q, run_id)
        return key, table, summary_markdown(q, run_id, q.previous_run(run_id), table=table)

    key, table, markdown = after_run(lake_url, summaries)  # this process holds the run: DuckDB capped
    create_markdown_artifact(markdown, key=f"raglake-summary-{key}", description=f"raglake run {run_id}")
    create_table_artifact(
        table,
        key=f"raglake-headline-{key}",
        description=f"headline metrics of run {run_id}: n, mean, 95% CI",
    )


def _publish(lake_url: str, run_id: str) -> None:
    engine.call(publish_summary, lake_url, run_id)


__all__ = ["evaluate", "evaluate_in_process", "publish_summary", "PREFECT_TASKS"]
