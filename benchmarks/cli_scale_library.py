"""The library path of benchmarks/cli_scale.py: one run's pipeline steps called without Prefect.

    python benchmarks/cli_scale_library.py GOLDEN CAPTURES LAKE BATCH_SIZE METRIC,METRIC,…

The same functions the flow's tasks run (their plain `.fn`), in the same order: plan → stage the golden
set → capture (replay) → score each batch → run-level figures → land, then the post-run work the CLI
does with raglake's own code (the flow's headline line and summary tables, the command's printed run
summary), so that what the CLI spends beyond this is Prefect's engine and API server (and the
Prefect-free part of the command's start-up: parsing options, importing typer)."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raglake.cli.common import print_run_summary  # noqa: E402
from raglake.metrics.registry import metric_versions  # noqa: E402
from raglake.pipeline.finish import capture_facts, finish_run  # noqa: E402
from raglake.pipeline.lakes import open_lake  # noqa: E402
from raglake.pipeline.plan import plan_run  # noqa: E402
from raglake.pipeline.rows import land_staged_run  # noqa: E402
from raglake.pipeline.settings import RunSettings  # noqa: E402
from raglake.report.artifacts import summary_markdown, summary_table  # noqa: E402
from raglake.tasks.capture import capture_batch  # noqa: E402
from raglake.tasks.score import ScoreSettings, score_cases  # noqa: E402


def main(golden: str, captures: str, lake: str, batch_size: str, metrics: str) -> None:
    t0 = time.perf_counter()
    settings = RunSettings(
        golden=golden,
        target=f"replay:{captures}",
        lake=lake,
        metrics=metrics.split(","),
        k=10,
        batch_size=int(batch_size),
    )
    plan = plan_run(settings)
    t_planned = time.perf_counter()
    batches = [capture_batch.fn(plan.target, b, plan.run_id, None) for b in plan.stage()]
    t_captured = time.perf_counter()
    shared = ScoreSettings.of(metric_versions(plan.metrics), plan.config, plan.target.known_docs(), None)
    scored = [score_cases.fn(b, shared) for b in batches]
    t_scored = time.perf_counter()
    captures_read = capture_facts(scored)
    record, values, coverage = finish_run(
        plan,
        captures_read,
        dt.datetime.now(dt.timezone.utc),
        suite_seconds=t_scored - t0,
        stage_seconds={
            "inputs": plan.input_seconds,
            "capture": t_captured - t_planned,
            "scoring": t_scored - t_captured,
        },
    )
    land_staged_run(plan.lake, record, scored, values, plan.scoring_id, coverage)
    t_landed = time.perf_counter()
    post_run(plan.lake.url, plan.run_id)
    print(
        f"inputs {plan.input_seconds:.1f} s, plan+stage+capture {t_captured - t0:.1f} s, "
        f"scoring {t_scored - t_captured:.1f} s, "
        f"finish+land {t_landed - t_scored:.1f} s, post-run summaries {time.perf_counter() - t_landed:.1f} s"
    )


def post_run(lake_url: str, run_id: str) -> None:
    """What the CLI computes after landing, with raglake's code only: the flow's headline log line
    (`summarize`) and its summary artifacts' content (`publish_summary`), then `raglake run`'s printout."""
    q = open_lake(lake_url)
    q.breakdown([run_id], "all")
    summary_markdown(q, run_id, q.previous_run(run_id))
    summary_table(q, run_id)
    print_run_summary(open_lake(lake_url), run_id)


if __name__ == "__main__":
    main(*sys.argv[1:])
