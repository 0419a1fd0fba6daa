"""Judge steps as objects: declared in the metrics layer (raglake.metrics.steps), run by the judge layer;
each step owns its "does it apply / is a call needed" rule; the judge stage's per-run state and the
process's models are owned by objects with a lifetime."""

from __future__ import annotations

import pickle
import re

import pytest

from raglake.embed.encoders import Encoders
from raglake.judge.config import JudgeConfig
from raglake.judge.prompts import get_prompt
from raglake.judge.steps import RUNNERS, prompt_refs
from raglake.lake.store import Lake
from raglake.metrics import steps
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import all_metrics, get_metric
from raglake.metrics.steps import ALL_STEPS, CaseView, StepOutcome, step_named
from raglake.pipeline import judging
from raglake.pipeline.judging import JudgeRuns
from raglake.pipeline.rescore import _stale_prompts
from tests.judgecases import CHUNKS, capture, case, done, scored
from tests.judgekit import canned


def test_metrics_name_their_steps_as_declared_objects_never_as_strings():
    named = [s for m in all_metrics() if m.builtin for s in m.steps]  # a user's rubric defines its own step
    assert named, "no metric reads a judge step"
    assert all(s in ALL_STEPS for s in named)
    assert not [(m.name, i) for m in all_metrics() for i in m.inputs if i.startswith("judge:")]
    # every judge metric reads at least one step; the docs table still shows them
    assert all(m.steps for m in all_metrics() if m.family == "judge")
    assert "judge:groundedness" in get_metric("groundedness").as_row()["inputs"].split(",")


@pytest.mark.parametrize("step", ALL_STEPS, ids=lambda s: s.name)
def test_each_step_renders_its_first_prompt_or_has_a_runner(step):
    view = CaseView.of(case(), capture(*CHUNKS), 3)
    assert step.check(view) is None
    if step not in RUNNERS:
        get_prompt(step.prompts[0]).render(step.values(view))  # a missing variable raises


def test_a_step_survives_pickling_as_its_constant():
    assert pickle.loads(pickle.dumps(steps.FACTUAL_ACCURACY)) is steps.FACTUAL_ACCURACY
    with pytest.raises(Exception, match="did you mean"):
        step_named("groundednes")


def _ctx(c=None, cap=None) -> CaseContext:
    return CaseContext(c or case(), cap or capture(*CHUNKS), ScoringConfig(k=3))


def test_each_step_decides_whether_a_case_needs_a_call():
    assert not steps.ABSTENTION.needed(_ctx())  # answerable: the abstention metrics do not apply
    assert steps.ABSTENTION.needed(_ctx(case(answerable=False)))
    assert not steps.ABSTENTION.needed(_ctx(case(answerable=False), capture(*CHUNKS, abstained=False)))
    assert not steps.ACKNOWLEDGES_CONFLICT.needed(_ctx())  # no acknowledge_both rule
    assert steps.LABEL_ANSWER.needed(_ctx())
    assert not steps.GROUNDEDNESS.needed(_ctx(cap=capture()))  # no chunks: undefined without a judge
    assert not steps.GROUNDEDNESS.needed(_ctx(cap=capture(*CHUNKS, status="error", error="HTTP 500")))
    assert steps.GROUNDEDNESS.check(CaseView.of(case(), capture(), 3)) == "no_chunks"


def test_the_geval_formula_is_the_metrics_and_the_spot_checks():
    data = canned("factual_accuracy", {})
    s = scored(case(), capture(*CHUNKS), ["factual_accuracy"], {"factual_accuracy": done(data)})["factual_accuracy"]
    assert s.value == steps.FACTUAL_ACCURACY.score(data)
    near = {**data, "correctness": {"score": data["correctness"]["score"] - 30, "reasoning": "r"}}
    far = {**data, "correctness": {"score": 0, "reasoning": "r"}}
    # 0.5 · 30 / 100 · 5 = 0.75 points on the 0-5 view: agree; 0.5 · 80 / 100 · 5 = 2: disagree
    assert not steps.FACTUAL_ACCURACY.disagree(done(data), done(near))
    assert steps.FACTUAL_ACCURACY.disagree(done(data), done(far))
    assert steps.ANSWER_CLASS.disagree(done({"class": "CORRECT"}), done({"class": "WRONG"}))


def test_score_rows_take_the_prompt_refs_from_the_outcome():
    o = StepOutcome("ok", canned("groundedness", {}), model="m", prompt_id="groundedness", prompt_version="7")
    s = scored(case(), capture(*CHUNKS), ["groundedness"], {"groundedness": o})["groundedness"]
    assert (s.prompt_id, s.prompt_version) == ("groundedness", "7")
    none = scored(case(), capture(*CHUNKS), ["groundedness"], None)["groundedness"]  # no judge: no call
    assert (none.status, none.prompt_id, none.prompt_version) == ("skipped", None, None)


def test_rescore_sees_a_stale_prompt_in_any_row():
    ids, versions = prompt_refs([steps.FAITHFULNESS])
    current = {p: int(v) for p, v in zip(ids.split("+"), versions.split("+"))}
    assert _stale_prompts([f"{ids}@{versions}", "extract_claims@1"], current) is None
    stale = f"extract_claims@{current['extract_claims'] + 1}"
    assert _stale_prompts([f"{ids}@{versions}", stale], current) == stale
    assert re.fullmatch(r"extract_claims\+verify_claims@\d+\+\d+", f"{ids}@{versions}")


class _Ledger:
    def __init__(self, lake: Lake, run_id: str | None):
        self.flushed = 0

    def flush(self) -> None:
        self.flushed += 1


def test_a_runs_judge_session_is_shared_until_the_run_closes_it(tmp_path, monkeypatch):
    monkeypatch.setattr(judging, "JudgeLedger", _Ledger)
    runs, config, lake = JudgeRuns(), JudgeConfig(base_url="http://127.0.0.1:9", model="m"), str(tmp_path)
    first = runs.open(config, lake, "r1")
    assert runs.open(config, lake, "r1") is first and runs.open(config, lake, "r2") is not first
    runs.close(lake, "r1")
    assert first.ledger.flushed == 1 and not runs.is_open(lake, "r1") and runs.is_open(lake, "r2")
    assert runs.open(config, lake, "r1") is not first  # a new run of the same id starts afresh
    runs.clear()
    assert not runs.is_open(lake, "r1") and not runs.is_open(lake, "r2")


def test_the_process_models_live_until_cleared():
    encoders = Encoders()
    first = encoders.text_encoder(None, None)
    assert encoders.text_encoder(None, None) is first and encoders.embedder() is first.embedder
    encoders.clear()
    assert encoders.text_encoder(None, None) is not first
