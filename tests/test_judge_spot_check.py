"""The reliability spot-check (seed 001, issue 14): max(share · N, minimum) questions really get two
judgements when that many can (the sample is drawn among cases that can give a pair, and a question the
second judgement fails for is replaced), the prompt-variant option asks the same judge in other words,
`spot_check_n` counts questions, and the judge's latency per prompt and price flag reach the run figures."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from raglake.errors import ConfigError
from raglake.judge.budget import Budget
from raglake.judge.config import JudgeConfig, load_prices
from raglake.judge.ledger import JudgeLedger
from raglake.judge.prompts import get_prompt, get_variant
from raglake.judge.stage import JudgedBatch, SpotSample, judge_batch
from raglake.metrics.context import ScoringConfig
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import get_metric
from raglake.metrics.steps import ALL_STEPS
from raglake.pipeline.settings import RunSettings, build
from raglake.schemas import Capture, GoldenCase
from tests.fake_openai import FakeOpenAI, Reply, canned_reply, error, ok, user_message

MAIN, SPOT = "gpt-4o-mini", "other-judge"
METRICS = [get_metric("groundedness"), get_metric("answer_class_correct")]  # two steps the spot-check repeats


class ListStore:
    """An in-memory judge_calls table."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def read(self, statuses: Sequence[str]) -> list[tuple[str, str, str | None]]:
        return [(r["call_key"], r["status"], r["response"]) for r in self.rows if r["status"] in statuses]

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        self.rows.extend(rows)


def _case(i: int, kind: str) -> tuple[GoldenCase, Capture]:
    """A case that can give a pair (`normal`), or cannot: an empty answer, or an uncertainty phrase with
    no chunks (its class is decided by the phrase, without a judge)."""
    case = GoldenCase(
        id=f"{kind}-{i:02d}", question=f"Which database does service {i} use?", reference_answer="Postgres."
    )
    chunks = [{"rank": 1, "rel_path": "a.md", "text": f"Service {i} runs Postgres."}]
    answer = {"normal": f"Service {i} uses Postgres [1].", "empty": "", "phrase": "I don't know."}[kind]
    return case, Capture(case_id=case.id, answer=answer, retrieved=[] if kind == "phrase" else chunks)


def _cases(**counts: int) -> list[tuple[GoldenCase, Capture]]:
    return [_case(i, kind) for kind, n in counts.items() for i in range(n)]


def _run(
    server: FakeOpenAI,
    pairs: list[tuple[GoldenCase, Capture]],
    spot: JudgeConfig | None,
    sample: SpotSample = SpotSample(share=0.1, minimum=10),  # the settings' defaults (SpotCheckSettings)
    store: ListStore | None = None,
) -> JudgedBatch:
    config = JudgeConfig(base_url=server.url, model=MAIN, max_retries=0, backoff_s=0.01, prices=load_prices())
    ledger = JudgeLedger(store or ListStore(), run_id="r-spot")
    return judge_batch(pairs, METRICS, ScoringConfig(), config, ledger, Budget(), None, spot, sample)


def _spot(server: FakeOpenAI, **kw: Any) -> JudgeConfig:
    return JudgeConfig(base_url=server.url, model=SPOT, max_retries=0, backoff_s=0.01, **kw)


def _questions(batch: JudgedBatch) -> set[str]:
    return {cid for cid, _, _ in batch.spot_pairs}


def test_the_sample_is_drawn_among_cases_that_can_give_a_pair():
    """30 cases, 20 of which cannot give a pair: the old sample (10 ids by hash among all 30) re-judged
    about a third of 10; now all 10 that can are judged twice."""
    pairs = _cases(normal=10, empty=10, phrase=10)
    with FakeOpenAI() as server:
        batch = _run(server, pairs, _spot(server))
        spot_requests = [r for r in server.requests if r.model == SPOT]
    assert _questions(batch) == {c.id for c, _ in pairs if c.id.startswith("normal")}
    assert len(batch.spot_pairs) == 20  # groundedness and answer_class for each question
    assert len(spot_requests) == 20
    # the phrase cases' class was decided without a judge: nothing to compare, never sent to the second judge
    assert not any("I don't know." in user_message(r) for r in spot_requests)


def test_a_question_the_second_judgement_fails_for_is_replaced():
    failing = {f"normal-{i:02d}" for i in range(0, 25, 3)}  # 9 of 25

    def second_fails(body: dict[str, Any]) -> Reply:
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        number = int(re.search(r"[Ss]ervice (\d+)", text).group(1))
        if body["model"] == SPOT and f"normal-{number:02d}" in failing:
            return error(400, "the second judge refuses this one")
        return canned_reply(body)

    pairs = _cases(normal=25)
    with FakeOpenAI(handler=second_fails) as server:
        batch = _run(server, pairs, _spot(server))
    questions = _questions(batch)
    assert len(questions) == 10 and not questions & failing


def test_fewer_pairable_cases_than_the_minimum_are_all_judged_twice():
    with FakeOpenAI() as server:
        batch = _run(server, _cases(normal=4, empty=20), _spot(server))
    assert len(_questions(batch)) == 4


def test_the_share_sets_the_size_above_the_minimum():
    with FakeOpenAI() as server:
        batch = _run(server, _cases(normal=40), _spot(server), SpotSample(share=0.5, minimum=10))
    assert len(_questions(batch)) == 20


def test_a_second_judge_that_answers_nothing_ends_the_spot_check_after_one_round():
    def second_down(body: dict[str, Any]) -> Reply:
        return error(400, "down") if body["model"] == SPOT else canned_reply(body)

    with FakeOpenAI(handler=second_down) as server:
        batch = _run(server, _cases(normal=30), _spot(server))
        asked = sum(r.model == SPOT for r in server.requests)
    assert batch.spot_pairs == [] and asked == 10 * 2  # the first 10 questions' two steps, then no more


def test_the_prompt_variant_option_asks_the_same_judge_in_other_words():
    variant_system = get_variant("groundedness").system.strip()

    def variant_scores_lower(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"].startswith(variant_system):
            return ok({"score": 1, "supported_claims": [], "unsupported_claims": ["x"], "reasoning": "weak"})
        return canned_reply(body)  # groundedness 4, class CORRECT

    store = ListStore()
    with FakeOpenAI(handler=variant_scores_lower) as server:
        spot = JudgeConfig(base_url=server.url, model=MAIN, max_retries=0, prompt_variant=True)
        batch = _run(server, _cases(normal=12), spot, store=store)
        models = {r.model for r in server.requests}
    assert models == {MAIN}  # one model: the second judgement is the variant wording
    assert len(_questions(batch)) == 10
    ledger_prompts = {r["prompt_id"] for r in store.rows}
    assert {"groundedness", "answer_class", "groundedness~b", "answer_class~b"} <= ledger_prompts
    disagree = {step: d for _, step, d in batch.spot_pairs}
    assert disagree == {"groundedness": True, "answer_class": False}  # 4 vs 1 differs by > 1 point
    assert set(batch.stats.latency_ms) == {
        "judge:answer_class",
        "judge:groundedness",
        "spot_check:answer_class~b",
        "spot_check:groundedness~b",
    }


def test_every_step_the_spot_check_repeats_has_a_variant_of_the_same_shape():
    for step in ALL_STEPS:
        if step.spot_check is None:
            continue
        for prompt_id in step.prompts:
            main, variant = get_prompt(prompt_id), get_variant(prompt_id)
            assert variant.variant and variant.key == f"{prompt_id}~{variant.variant}"
            assert (variant.variables, variant.output_schema) == (main.variables, main.output_schema)
            assert (variant.system, variant.user) != (main.system, main.user)


def test_spot_check_n_counts_questions_and_the_rate_counts_pairs():
    pairs = [("q1", "groundedness", True), ("q1", "answer_class", False), ("q2", "groundedness", False)]
    values = {
        v.metric: v for v in get_metric("judge_disagreement_rate").fn(RunInputs([], judge_stats={"spot_pairs": pairs}))
    }
    assert (values["spot_check_n"].value, values["spot_check_n"].n, values["spot_check_n"].unit) == (
        2.0,
        2,
        "questions",
    )
    assert (values["judge_disagreement_rate"].value, values["judge_disagreement_rate"].n) == (pytest.approx(1 / 3), 3)


def test_judge_latency_per_prompt_comes_from_the_calls_made():
    store = ListStore()
    with FakeOpenAI() as server:
        batch = _run(server, _cases(normal=12), _spot(server), store=store)
    for stage, figures in batch.stats.latency_ms.items():
        kind, prompt = stage.split(":")
        model = MAIN if kind == "judge" else SPOT
        calls = [r["latency_ms"] for r in store.rows if r["prompt_id"] == prompt and r["model"] == model]
        assert figures["n"] == len(calls) > 0
        assert figures["p50"] == pytest.approx(float(np.percentile(calls, 50)))
        assert figures["p95"] == pytest.approx(float(np.percentile(calls, 95)))
    stats = dataclasses.asdict(batch.stats)
    assert "_latencies" not in stats  # only the summary travels with the stage's figures
    values = get_metric("latency_p95_ms").fn(RunInputs([], judge_stats=stats))
    assert {v.stage for v in values} == set(batch.stats.latency_ms)


@pytest.mark.parametrize(
    "stats, cost, known",
    [
        ({"calls": 4, "cost_usd": 0.02, "priced_calls": 4, "unpriced_calls": 0}, 0.02, 1.0),
        ({"calls": 6, "cost_usd": 0.02, "priced_calls": 4, "unpriced_calls": 2}, 0.02, 0.0),  # a lower bound
        ({"calls": 4, "cost_usd": 0.0, "priced_calls": 0, "unpriced_calls": 4}, math.nan, 0.0),  # unknown, not 0
        ({"calls": 0, "cost_usd": 0.0, "priced_calls": 0, "unpriced_calls": 0, "ledger_hits": 9}, 0.0, None),
    ],
)
def test_a_cost_without_a_price_is_flagged_never_a_silent_zero(stats, cost, known):
    run = RunInputs([], judge_stats=stats)
    [value] = get_metric("judge_cost_usd").fn(run)
    assert (math.isnan(value.value) and math.isnan(cost)) or value.value == pytest.approx(cost)
    flags = get_metric("judge_price_known").fn(run)
    assert [f.value for f in flags] == ([] if known is None else [known])


def test_an_unpriced_judge_counts_its_calls_as_unpriced():
    with FakeOpenAI() as server:
        batch = _run(server, _cases(normal=3), _spot(server))  # the spot-check model is not in the price table
    assert batch.stats.unpriced_calls == 3 * 2 and batch.stats.priced_calls == 3 * 2


def test_a_spot_check_needs_a_second_model_or_the_variant():
    judge = {"base_url": "http://127.0.0.1:9/v1", "model": MAIN}
    with pytest.raises(ConfigError, match="spot-check-variant"):
        build(RunSettings, judge=judge, spot_check={"share": 0.2})
    main, spot = build(RunSettings, judge=judge, spot_check={"variant": True}).judge_configs()
    assert (spot.model, spot.prompt_variant, main.prompt_variant) == (MAIN, True, False)
    _, spot = build(RunSettings, judge=judge, spot_check={"model": SPOT}).judge_configs()
    assert (spot.model, spot.prompt_variant) == (SPOT, False)


def test_the_cli_and_the_report_flag_a_cost_without_a_price():
    from rich.console import Console

    from raglake.cli import render
    from raglake.report.html import figure_value

    row = {"metric": "judge_cost_usd", "stage": None, "value": 0.0123, "n": 3, "unit": "usd", "price_known": False}
    assert figure_value(row) == "$0.0123 (price unknown)"
    assert figure_value({**row, "value": math.nan}) == "– (price unknown)"
    assert figure_value({**row, "price_known": True}) == "$0.0123" == figure_value({**row, "price_known": None})
    console = Console(width=200)
    with console.capture() as out:
        console.print(render.figures_table([row, {**row, "metric": "judge_calls", "price_known": None}], "t"))
    assert out.get().count("(price unknown)") == 1


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_the_command_line_runs_a_prompt_variant_spot_check(tmp_path):
    from typer.testing import CliRunner

    from raglake.cli import app
    from raglake.lake.query import connect, fetch
    from raglake.lake.store import Lake
    from tests.test_judge_flow import write_inputs

    golden, target = write_inputs(tmp_path / "inputs")
    lake = str(tmp_path / "lake")
    with FakeOpenAI() as server:
        args = ["run", "--golden", golden, "--target", target, "--lake", lake, "--metrics", "groundedness"]
        args += ["--judge-base-url", server.url, "--judge-model", MAIN, "--spot-check-variant", "--spot-check-min", "2"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output + repr(result.exception)
        assert {r.model for r in server.requests} == {MAIN}
    con = connect(Lake(lake))
    [(run_id, models, config)] = fetch(con, "SELECT run_id, judge_models, config_json FROM runs")
    assert models == MAIN and json.loads(config)["spot_check"]["variant"] is True
    figures = dict(fetch(con, "SELECT metric, value FROM run_metrics WHERE run_id = $r AND stage IS NULL", r=run_id))
    assert figures["spot_check_n"] == 2 and figures["judge_disagreement_rate"] == 0  # canned replies agree
    prompts = [p for (p,) in fetch(con, "SELECT prompt_id FROM judge_calls WHERE run_id = $r", r=run_id)]
    assert prompts.count("groundedness") == 4 and prompts.count("groundedness~b") == 2
