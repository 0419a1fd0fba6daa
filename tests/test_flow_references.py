"""Nothing big travels through Prefect: every task of `evaluate` and `rescore` receives and returns
references (batch refs, staged paths, content keys, small settings), never cases, captures or score rows;
the same references work on the thread runner and (tests/test_dask_runner.py) on Dask."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pyarrow as pa
import pytest
from pydantic import BaseModel

from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.scoring import ScoredBatch
from raglake.pipeline.settings import RunSettings
from raglake.spool import Spool
from tests.conftest import FIXTURES

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

GOLDEN = str(FIXTURES / "mini_golden.jsonl")
TARGET = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
BIG = (BaseModel, ScoredBatch, pa.Table, Spool)  # cases, captures, score rows, spooled records


def _big_things(value: Any, path: str = "") -> list[str]:
    """Where in a task's argument or result a case, capture, score table or long list hides."""
    if isinstance(value, BIG):
        return [f"{path}: {type(value).__name__}"]
    if isinstance(value, (list, tuple, set, frozenset)) and not all(isinstance(v, str) for v in value):
        return [f for i, v in enumerate(value) for f in _big_things(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in _big_things(v, f"{path}.{k}")]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [
            f for fld in dataclasses.fields(value) for f in _big_things(getattr(value, fld.name), f"{path}.{fld.name}")
        ]
    return []


@pytest.fixture
def seen(monkeypatch) -> list[str]:
    """Every task's arguments and result are walked; what is found is collected."""
    import raglake.tasks.capture
    import raglake.tasks.embed
    import raglake.tasks.judge
    import raglake.tasks.land
    import raglake.tasks.score
    from raglake.flows import evaluate, rescore

    found: list[str] = []
    tasks = [
        raglake.tasks.capture.capture_batch,
        raglake.tasks.score.score_cases,
        raglake.tasks.embed.embed_texts,
        raglake.tasks.judge.judge_cases,
        raglake.tasks.land.land,
        rescore.land_rescored,
        evaluate.publish_summary,
    ]
    for task in tasks:

        def spy(*args: Any, __fn=task.fn, __name=task.name, **kwargs: Any) -> Any:
            found.extend(f"{__name} argument{p}" for p in _big_things([*args, *kwargs.values()]))
            result = __fn(*args, **kwargs)
            found.extend(f"{__name} result{p}" for p in _big_things(result))
            found.append(f"ran {__name}")
            return result

        monkeypatch.setattr(task, "fn", functools.wraps(task.fn)(spy))
    return found


def test_evaluate_and_rescore_tasks_pass_only_references(lake_dir: str, seen: list[str]) -> None:
    from raglake.flows.evaluate import evaluate
    from raglake.flows.rescore import rescore

    run_id = evaluate(
        RunSettings(
            golden=GOLDEN, target=TARGET, lake=lake_dir, batch_size=2, metrics=["mrr_at_k", "semantic_similarity"]
        )
    )
    rescore(RescoreSettings(run_ids=[run_id], lake=lake_dir, metrics=["mrr_at_k"], force=True, batch_size=2))
    ran = {s.removeprefix("ran ") for s in seen if s.startswith("ran ")}
    assert {"capture-batch", "score-batch", "embed-texts", "land-run", "land-scores"} <= ran  # the spy saw them
    assert [s for s in seen if not s.startswith("ran ")] == []


def test_the_walk_finds_what_the_old_tasks_passed() -> None:
    """The check above could fail: cases, captures and scored batches (what the tasks took before) are found."""
    from raglake.golden import load_golden
    from raglake.targets.replay import ReplayFile

    golden = load_golden(GOLDEN)
    cases = list(golden.cases)
    captures = ReplayFile(TARGET.removeprefix("replay:")).capture(cases)
    assert len(_big_things([cases, tuple(captures), {"scored": ScoredBatch()}])) == len(cases) * 2 + 1
    assert _big_things(golden) == [".cases: Spool"]
