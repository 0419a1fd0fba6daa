"""The deployments: every entrypoint of prefect.yaml imports, its parameters validate against the
flow's signature, its schedule parses, and serve.py builds the same deployments."""

from __future__ import annotations

import importlib.util

import pytest
import yaml
from prefect.flows import load_flow_from_entrypoint

from raglake.config.front import resolve
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings
from tests.conftest import ROOT

SPEC = yaml.safe_load((ROOT / "deployments" / "prefect.yaml").read_text())


def _flow(entrypoint: str):
    """The flow as a worker loads it: a module path of the installed package, not a file of the checkout."""
    return load_flow_from_entrypoint(entrypoint, use_placeholder_flow=False)


@pytest.mark.parametrize("deployment", SPEC["deployments"], ids=[d["name"] for d in SPEC["deployments"]])
def test_every_deployment_imports_and_its_parameters_validate(deployment) -> None:
    from prefect.flows import Flow

    flow = _flow(deployment["entrypoint"])
    assert isinstance(flow, Flow)
    validated = flow.validate_parameters(deployment.get("parameters", {}))
    assert set(validated) >= set(deployment.get("parameters", {}))
    with pytest.raises(Exception):  # noqa: B017 - Prefect's own error type: a parameter the flow does not take
        flow.validate_parameters({**deployment.get("parameters", {}), "not_a_parameter": 1})
    given = deployment["parameters"]
    if "settings" in given:  # the one typed parameter, built from the YAML's plain mapping
        settings = validated["settings"]
        assert isinstance(settings, (RunSettings, RescoreSettings))
        assert settings.model_dump(include=set(given["settings"])) == given["settings"]
    else:  # an eval file the worker reads (relative to $RAGLAKE_HOME: the repository root here)
        assert (ROOT / given["config"]).is_file()
        (run, *_) = resolve(ROOT / given["config"], given["overrides"], discover=False).runs
        assert isinstance(run, RunSettings)
    for schedule in deployment.get("schedules", []):
        from prefect.client.schemas.schedules import CronSchedule

        CronSchedule(cron=schedule["cron"], timezone=schedule.get("timezone"))


def test_a_deployment_passes_judge_and_scoring_settings_as_mappings_and_bad_values_are_refused() -> None:
    """Prefect validates the nested settings: a deployment may give a judge, scoring and spot-check as
    plain mappings (typed on arrival); a bad value or an unknown key fails before the flow runs."""
    from prefect.exceptions import ParameterTypeError

    flow = _flow("raglake.flows.evaluate:evaluate")
    given = {
        "target": "replay:data/captures/basic_search.jsonl",
        "scoring": {"bertscore_idf": True, "theta_s": 0.6},
        "judge": {"base_url": "http://judge:8000/v1", "model": "m", "api_key_env": "JUDGE_KEY", "concurrency": 2},
        "spot_check": {"model": "m2", "share": 0.2},
    }
    settings = flow.validate_parameters({"settings": given})["settings"]
    assert isinstance(settings, RunSettings)
    assert settings.scoring_config().bertscore_idf and settings.scoring_config().theta_s == 0.6
    judge, spot = settings.judge_configs()
    assert (judge.base_url, judge.model, judge.api_key_env, judge.concurrency) == (
        "http://judge:8000/v1",
        "m",
        "JUDGE_KEY",
        2,
    )
    assert (spot.model, spot.base_url, settings.spot_check.share) == ("m2", "http://judge:8000/v1", 0.2)
    for bad in (
        {"k": 0},
        {"judge": {"base_url": "judge:8000", "model": "m"}},
        {"scoring": {"theta_s": 2}},
        {"spot_check": {"model": "m2"}},
        {"metrics": ["recal_any_at_k"]},
        {"judge_model": "m"},
    ):
        with pytest.raises(ParameterTypeError):
            flow.validate_parameters({"settings": bad})


def test_the_nightly_evaluation_and_the_on_demand_rescore_exist() -> None:
    entrypoints = {d["name"]: d["entrypoint"] for d in SPEC["deployments"]}
    assert entrypoints == {
        "nightly": "raglake.flows.evaluation:evaluation",
        "nightly-settings": "raglake.flows.evaluate:evaluate",
        "rescore": "raglake.flows.rescore:rescore",
    }
    nightly = next(d for d in SPEC["deployments"] if d["name"] == "nightly")
    assert nightly["schedules"][0]["cron"] == "0 2 * * *"


def test_serve_builds_the_same_deployments() -> None:
    spec = importlib.util.spec_from_file_location("serve", ROOT / "deployments" / "serve.py")
    serve = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(serve)
    built = serve.deployments()
    assert [d.name for d in built] == [d["name"] for d in SPEC["deployments"]]
    nightly = built[0]
    assert nightly.parameters == SPEC["deployments"][0]["parameters"]
    assert nightly.schedules and nightly.schedules[0].schedule.cron == "0 2 * * *"
