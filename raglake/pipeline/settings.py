"""What a run is asked to do, as one typed model: built once by the command line (or from a deployment's
parameters, which Prefect validates into it), handed as-is to the flow and read by the run's plan.
Judge, scoring and spot-check settings are nested models, never dicts; no API key is ever held here,
only the name of the variable that holds it."""

from __future__ import annotations

import datetime as dt
import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from raglake.analysis import is_selector
from raglake.embed.model import check_device, resolve_device
from raglake.errors import ConfigError
from raglake.judge.config import JudgeConfig, load_prices
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import select_metrics
from raglake.pipeline.rescore import KEPT_NO_JUDGE, Decision
from raglake.pipeline.runners import RunnerSpec

SAMPLE_DIR = Path(str(resources.files("raglake.sample")))  # data/ in a checkout, raglake/sample/ in a wheel


def sample_path(*parts: str) -> str:
    """A file of the bundled sample, relative to the working directory when it lies beneath it."""
    path = SAMPLE_DIR.joinpath(*parts)
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else Path(rel).as_posix()


SAMPLE_GOLDEN = sample_path("golden", "sample.jsonl")
SAMPLE_CAPTURES = tuple(f"replay:{sample_path('captures', m + '.jsonl')}" for m in ("basic_search", "local_search"))
DEFAULT_TARGET = f"builtin:{sample_path('corpus')}"
RUN_ID_MAX = 128
RUN_ID = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,127}")  # fullmatch: a folder name (partitions, caches), not a path


def name_problem(value: str, what: str, *, run_id: bool = False) -> str | None:
    """Why `value` cannot be a run id (`run_id`: nor a selector, `latest`) or a name raglake makes a file
    name of (`what` says which), or None: 1 to 128 letters, digits, '.', '_' and '-', a letter first."""
    if len(value) > RUN_ID_MAX:
        return f"{what} {value[:24]!r}… is {len(value)} characters long; the limit is {RUN_ID_MAX}"
    if not RUN_ID.fullmatch(value):  # not match: `$` would let a trailing newline through
        return f"{what} {value!r} must start with a letter and use only letters, digits, '.', '_' and '-'"
    if run_id and is_selector(value):
        return f"{what} {value!r} is a selector ('latest' names the newest one); choose another"
    return None


# CLI option of a settings field, where it is not "--" + the field name with dashes
OPTION_NAMES = {
    "judge.requests_per_minute": "--judge-rpm",
    "judge.tokens_per_minute": "--judge-tpm",
    "judge.timeout_s": "--judge-timeout",
    "judge.max_cost_usd": "--judge-max-cost",
    "spot_check.minimum": "--spot-check-min",
    "run_ids": "RUNS",
    "all_runs": "--all",
}


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScoringSettings(_Settings):
    """The scoring settings besides k and require_snippets (raglake.metrics.context.ScoringConfig)."""

    theta_s: float = Field(0.5, ge=-1.0, le=1.0, description="context_sufficiency threshold θs (cosine)")
    theta_h: float = Field(
        0.7, ge=-1.0, le=1.0, description="answer_hallucination threshold θh (a sentence's support, 0-1)"
    )
    bertscore_layer: int | None = Field(None, ge=1, description="BERTScore hidden layer (None: the model's last)")
    bertscore_idf: bool = False
    wp_weights: dict[str, float] = Field(default_factory=lambda: dict(ScoringConfig().wp_weights))
    ragas_weights: dict[str, float] = Field(default_factory=lambda: dict(ScoringConfig().ragas_weights))

    @field_validator("wp_weights", "ragas_weights")
    @classmethod
    def _weights(cls, value: dict[str, float], info: Any) -> dict[str, float]:
        known = getattr(ScoringConfig(), info.field_name)
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"unknown component {unknown[0]!r}; the components are {', '.join(known)}")
        if any(w < 0 for w in value.values()):
            raise ValueError("weights must not be negative")
        return {**known, **value}

    def config(self, k: int, require_snippets: bool) -> ScoringConfig:
        return ScoringConfig(k=k, require_snippets=require_snippets, **self.model_dump())


class JudgeSettings(_Settings):
    """An OpenAI-compatible judge: the user-settable fields of raglake.judge.config.JudgeConfig."""

    base_url: str
    model: str = Field(min_length=1)
    api_key_env: str = Field("OPENAI_API_KEY", min_length=1, description="the variable holding the key")
    timeout_s: float = Field(60.0, gt=0)
    concurrency: int = Field(8, ge=1)
    requests_per_minute: int | None = Field(None, ge=1)
    tokens_per_minute: int | None = Field(None, ge=1)
    max_retries: int = Field(4, ge=0)
    backoff_s: float = Field(1.0, ge=0)
    max_backoff_s: float = Field(60.0, ge=0)
    seed: int = 0
    max_calls: int | None = Field(None, ge=0)
    max_cost_usd: float | None = Field(None, ge=0)
    label: str | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, got {value!r}")
        return value

    def config(self) -> JudgeConfig:
        return JudgeConfig(**self.model_dump(), prices=load_prices())


class SpotCheckSettings(_Settings):
    """A second judgement of a share of the questions (reliability, seed 001): by a second judge model,
    by the same judge asked in the prompts' variant wording (`variant`), or both."""

    model: str | None = Field(None, min_length=1)  # None: the judge's own model (with variant)
    base_url: str | None = None  # None: the judge's
    variant: bool = False
    share: float = Field(0.1, gt=0, le=1)
    minimum: int = Field(10, ge=0)

    @model_validator(mode="after")
    def _second_opinion(self) -> SpotCheckSettings:
        if self.model is None and not self.variant:
            raise ValueError("a spot-check needs a second model (--spot-check-model) or --spot-check-variant")
        return self


def _known_metrics(names: list[str] | None) -> list[str] | None:
    try:
        select_metrics(names)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    return names or None


def _runner(spec: str) -> str:
    try:
        return str(RunnerSpec.parse(spec))
    except ConfigError as e:
        raise ValueError(str(e)) from None


def _device(name: str) -> str:
    """A --device value, kept as given (`auto` resolves where the run embeds); cuda or mps must be seen by torch."""
    try:
        return resolve_device(name) if name in ("cuda", "mps") else check_device(name)
    except ConfigError as e:
        raise ValueError(str(e)) from None


MetricNames = Annotated[list[str] | None, AfterValidator(_known_metrics)]
RunnerSpecText = Annotated[str, AfterValidator(_runner)]
DeviceName = Annotated[str, AfterValidator(_device)]


class RunSettings(_Settings):
    """One evaluation run: what the `run` command's options, the `evaluate` flow and the plan share."""

    golden: str = SAMPLE_GOLDEN
    target: str = DEFAULT_TARGET
    k: int = Field(5, ge=1)
    lake: str | None = None
    run_id: str | None = None
    labels: str | None = None
    metrics: MetricNames = None
    require_snippets: bool = False
    batch_size: int | None = Field(
        None, ge=1, description="cases per capture/scoring task; None: auto_batch_size of the run's case count"
    )
    results: str | None = None
    embedder: str | None = None
    device: DeviceName = "auto"
    runner: RunnerSpecText = "thread"
    scoring: ScoringSettings = ScoringSettings()
    judge: JudgeSettings | None = None
    spot_check: SpotCheckSettings | None = None

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        problem = None if value is None else name_problem(value, "run id", run_id=True)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _spot_needs_judge(self) -> RunSettings:
        if self.spot_check is not None and self.judge is None:
            raise ValueError("a spot-check needs a judge: give --judge-base-url and --judge-model too")
        return self

    def scoring_config(self) -> ScoringConfig:
        return self.scoring.config(self.k, self.require_snippets)

    def judge_configs(self) -> tuple[JudgeConfig | None, JudgeConfig | None]:
        """The judge and the spot-check judge (None when not configured)."""
        if self.judge is None:
            return None, None
        judge = self.judge.config()
        spot = self.spot_check
        if spot is None:
            return judge, None
        return judge, judge.with_model(spot.model or judge.model, spot.base_url, spot.variant)


class RescoreSettings(_Settings):
    """One re-scoring: which runs, which metrics, and the embedder and judge to use."""

    run_ids: list[str] | None = None
    since: dt.date | None = None
    until: dt.date | None = None
    all_runs: bool = False
    metrics: MetricNames = None
    lake: str | None = None
    embedder: str | None = None
    device: DeviceName = "auto"
    judge: JudgeSettings | None = None
    batch_size: int | None = Field(
        None, ge=1, description="cases per capture/scoring task; None: auto_batch_size of the run's case count"
    )
    dry_run: bool = False
    force: bool = Field(
        False, description="recompute every selected metric, changed or not (judge metrics only with a judge)"
    )
    runner: RunnerSpecText = "thread"

    def decide(self, decisions: list[Decision]) -> list[Decision]:
        """The decisions with --force applied: everything recomputed, but judge metrics without a judge
        (recomputing them would only replace their values by `skipped`)."""
        if not self.force:
            return decisions
        return [
            d if d.compute or d.reason == KEPT_NO_JUDGE else Decision(d.run_id, d.metric, True, "forced")
            for d in decisions
        ]


def build(model: type[_Settings], **values: Any) -> Any:
    """`model` from command-line values; a bad value is a ConfigError naming its option."""
    try:
        return model(**values)
    except ValidationError as e:
        raise ConfigError("; ".join(_describe(err) for err in e.errors())) from None


def _describe(err: Any) -> str:
    path = ".".join(str(p) for p in err["loc"])
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] != "value_error" and "input" in err and not isinstance(err["input"], dict):
        message += f" (got {err['input']!r})"
    if not path:
        return message
    option = OPTION_NAMES.get(path) or "--" + path.replace("spot_check.", "spot_check_").replace(
        "judge.", "judge_"
    ).replace("scoring.", "").replace("_", "-")
    return f"{option}: {message}"


BATCHES_PER_RUN = 20  # an automatic batch size aims at this many batches ...
MIN_BATCH, MAX_BATCH = 100, 5000  # ... within these bounds (memory is bounded by the batch, not the run)


def auto_batch_size(n_cases: int, given: int | None = None) -> int:
    """Cases per task: `given` when set, else n/20 between 100 and 5,000. Each task run costs Prefect
    ~20 ms of CPU, so a fixed 100 spends ~400 s on a 1M-case run; a batch of at most 5,000 keeps memory
    bounded (one batch scored at a time per worker) and a crashed run resumes losing at most a batch each."""
    if given is not None:
        return given
    return max(MIN_BATCH, min(MAX_BATCH, -(-n_cases // BATCHES_PER_RUN)))
