"""The typed run settings: every bad value is refused with the option it came from, the model builds
the configs the run uses, and the checked-inputs memo serves each check once, stays bounded and is
process-local."""

from __future__ import annotations

import pickle
import shutil

import pytest

from raglake.errors import ConfigError
from raglake.pipeline.plan import plan_for, plan_run, planned
from raglake.pipeline.rescore import KEPT_NO_JUDGE, Decision
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings, build
from tests.conftest import FIXTURES

REPLAY = f"replay:{FIXTURES / 'mini_captures.jsonl'}"


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"k": 0}, "k (--k): Input should be greater than or equal to 1 (got 0)"),
        ({"batch_size": 0}, "batch_size (--batch-size):"),
        ({"run_id": "7up"}, "run_id (--run-id): run id '7up' must start with a letter"),
        ({"runner": "daks"}, "runner (--runner): unknown runner 'daks'"),
        (
            {"metrics": ["recal_any_at_k"]},
            "metrics (--metrics): unknown metric 'recal_any_at_k' (did you mean 'recall_any_at_k'?)",
        ),
        ({"scoring": {"theta_s": 1.5}}, "scoring.theta_s (--theta-s):"),
        ({"scoring": {"wp_weights": {"corectness": 1}}}, "scoring.wp_weights: unknown component 'corectness'"),
        (
            {"judge": {"base_url": "judge:8000", "model": "m"}},
            "judge.base_url (--judge-base-url): must be an http(s) URL",
        ),
        (
            {"judge": {"base_url": "http://j/v1", "model": "m", "concurrency": 0}},
            "judge.concurrency (--judge-concurrency):",
        ),
        (
            {"judge": {"base_url": "http://j/v1", "model": "m", "requests_per_minute": 0}},
            "judge.requests_per_minute (--judge-requests-per-minute):",
        ),
        ({"spot_check": {"model": "m2"}}, "a spot-check needs a judge"),
        (
            {"judge": {"base_url": "http://j/v1", "model": "m"}, "spot_check": {"model": "m2", "share": 0}},
            "spot_check.share (--spot-check-share):",
        ),
        (
            {"judge": {"base_url": "http://j/v1", "model": "m"}, "spot_check": {"model": "m2", "minimum": -1}},
            "spot_check.minimum (--spot-check-minimum):",
        ),
        ({"judge_model": "m"}, "judge_model: unknown setting (did you mean 'judge.model'?)"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_its_option(values, words) -> None:
    with pytest.raises(ConfigError) as err:
        build(RunSettings, **values)
    assert words in str(err.value)


def test_the_settings_build_the_run_configs_and_hold_no_key() -> None:
    s = RunSettings(
        k=3,
        require_snippets=True,
        scoring={"bertscore_idf": True, "wp_weights": {"relevance": 0.1}},
        judge={"base_url": "http://j/v1", "model": "m", "api_key_env": "MY_KEY", "max_calls": 5},
        spot_check={"model": "m2", "base_url": "http://k/v1"},
    )
    config = s.scoring_config()
    assert (config.k, config.require_snippets, config.bertscore_idf) == (3, True, True)
    assert config.wp_weights["relevance"] == 0.1 and config.wp_weights["correctness"] == 0.4  # defaults kept
    judge, spot = s.judge_configs()
    assert (judge.model, judge.api_key_env, judge.max_calls) == ("m", "MY_KEY", 5) and judge.prices
    assert (spot.model, spot.base_url, spot.max_calls) == ("m2", "http://k/v1", 5)
    assert "key" not in s.model_dump_json().replace("api_key_env", "")
    assert RunSettings.model_validate_json(s.model_dump_json()) == s  # a deployment's JSON round trip
    assert build(RescoreSettings, all_runs=True, force=True).force


def test_a_run_is_planned_once_and_the_flow_takes_the_callers_plan(tmp_path) -> None:
    golden = tmp_path / "golden.jsonl"
    shutil.copy(FIXTURES / "mini_golden.jsonl", golden)
    settings = RunSettings(golden=str(golden), target=REPLAY, lake=str(tmp_path / "lake"), metrics=["mrr_at_k"])
    first = plan_run(settings)
    assert first.settings.run_id == first.run_id and first.input_seconds > 0  # the plan's settings name the run
    with planned(first):
        assert plan_for(first.settings) is first  # inside the caller's context: its plan, inputs not loaded again
        other = plan_for(settings.model_copy(update={"run_id": "r-other"}))
        assert other is not first and other.run_id == "r-other"  # another run: planned on its own
    assert plan_for(first.settings) is not first  # outside it (a deployment's flow run): planned afresh
    assert len(pickle.loads(pickle.dumps(settings)).model_dump()) == len(settings.model_dump())


def test_force_recomputes_everything_but_judge_metrics_without_a_judge() -> None:
    decisions = [
        Decision("r", "mrr_at_k", False, "unchanged (cache hit)"),
        Decision("r", "groundedness", False, KEPT_NO_JUDGE),
        Decision("r", "ndcg_at_k", True, "version 1 → 2"),
    ]
    assert RescoreSettings(all_runs=True).decide(decisions) == decisions
    forced = RescoreSettings(all_runs=True, force=True).decide(decisions)
    assert [(d.metric, d.compute, d.reason) for d in forced] == [
        ("mrr_at_k", True, "forced"),
        ("groundedness", False, KEPT_NO_JUDGE),
        ("ndcg_at_k", True, "version 1 → 2"),
    ]


def test_the_default_batch_size_follows_the_run_and_an_explicit_one_wins(tmp_path) -> None:
    from raglake.pipeline.settings import auto_batch_size

    # n / 20 rounded up, never under 100 nor over 5,000 (Prefect's cost is per task run; memory per batch)
    assert [auto_batch_size(n) for n in (1, 66, 2_000, 2_001, 40_000, 100_000, 1_000_000)] == [
        100, 100, 100, 101, 2_000, 5_000, 5_000,
    ]  # fmt: skip
    assert auto_batch_size(1_000_000, 7) == 7
    assert RunSettings().batch_size is None and RescoreSettings().batch_size is None

    golden = tmp_path / "golden.jsonl"
    lines = (FIXTURES / "mini_golden.jsonl").read_text().splitlines(True)
    golden.write_text("".join(lines))
    auto = plan_run(RunSettings(golden=str(golden), target=REPLAY, lake=str(tmp_path / "lake")))
    assert auto.batch_size == 100 and auto.record(auto.started_at, len(lines)).config["batch_size"] == 100
    given = plan_run(RunSettings(golden=str(golden), target=REPLAY, lake=str(tmp_path / "lake"), batch_size=2))
    assert given.batch_size == 2 and [b.n for b in given.stage()] == [2] * (len(lines) // 2) + [1] * (len(lines) % 2)
