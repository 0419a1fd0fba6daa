"""What a run is asked to do, as one typed model: built once by the command line (or from a deployment's
parameters, which Prefect validates into it), handed as-is to the flow and read by the run's plan.
Judge, scoring and spot-check settings are nested models, never dicts; no API key is ever held here,
only the name of the variable that holds it."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from raglake.analysis import is_selector
from raglake.embed.model import check_device, resolve_device
from raglake.errors import ConfigError, did_you_mean
from raglake.judge.config import JudgeConfig
from raglake.metrics.context import ScoringConfig
from raglake.metrics.extensions import Extensions
from raglake.metrics.registry import Metric
from raglake.metrics.variants import metric_entry
from raglake.pipeline.fields import Cli, leaf_fields, option_name
from raglake.pipeline.judge_settings import JudgeField, SpotCheckSettings, _Settings
from raglake.pipeline.judge_settings import JudgeSettings as JudgeSettings  # its models, named here too
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
SLICE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")
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


class ScoringSettings(_Settings):
    """The scoring settings besides k and require_snippets (raglake.metrics.context.ScoringConfig)."""

    theta_s: float = Field(0.5, ge=-1.0, le=1.0, description="context_sufficiency threshold θs (cosine)")
    theta_h: float = Field(
        0.7,
        ge=-1.0,
        le=1.0,
        description="answer_hallucination threshold θh: a sentence is unsupported when its support (0-1) is below it",
    )
    bertscore_layer: int | None = Field(None, ge=1, description="BERTScore hidden layer (default: the model's last)")
    bertscore_idf: bool = Field(False, description="weight BERTScore tokens by idf over the run's references")
    wp_weights: Annotated[dict[str, float], Cli(hidden=True)] = Field(
        default_factory=lambda: dict(ScoringConfig().wp_weights),
        description="weights of the white paper's composite score (correctness, faithfulness, precision, recall, "
        "relevance); the ones left out keep their defaults",
    )
    ragas_weights: Annotated[dict[str, float], Cli(hidden=True)] = Field(
        default_factory=lambda: dict(ScoringConfig().ragas_weights),
        description="weights of the ragas-style composite (faithfulness, context_precision, context_recall, "
        "answer_relevance); the ones left out keep their defaults",
    )

    @field_validator("wp_weights", "ragas_weights")
    @classmethod
    def _weights(cls, value: dict[str, float], info: Any) -> dict[str, float]:
        known = getattr(ScoringConfig(), info.field_name)
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(
                f"unknown component {unknown[0]!r}{did_you_mean(unknown[0], known)}; the components are "
                f"{', '.join(known)}"
            )
        if any(w < 0 for w in value.values()):
            raise ValueError("weights must not be negative")
        return {**known, **value}

    def config(self, k: int, require_snippets: bool) -> ScoringConfig:
        return ScoringConfig(k=k, require_snippets=require_snippets, **self.model_dump())


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


def _known_metrics(names: list[str] | None, info: ValidationInfo) -> list[str] | None:
    """Metric names a settings model may hold: built-in, installed, or its own extensions' (the field
    `extensions`, validated first, registered them)."""
    extensions = info.data.get("extensions") or Extensions()
    try:
        extensions.select(names)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    return names or None


MetricNames = Annotated[list[str] | None, AfterValidator(_known_metrics)]
RunnerSpecText = Annotated[str, AfterValidator(_runner)]
Orchestration = Literal["auto", "prefect", "in-process"]
IN_PROCESS_MAX_CASES = 2_000  # `auto`'s bound: a larger run keeps its flow run in Prefect's (local) database
DeviceName = Annotated[str, AfterValidator(_device)]
Metrics = Annotated[
    list[str] | None,
    AfterValidator(_known_metrics),
    Cli(short="-m"),
    Field(
        description="only these case-level metrics (names, comma-separated; NAME@k=10 is a metric at its own k or "
        "threshold; default: every built-in metric and the eval file's own)"
    ),
]


class RunSettings(_Settings):
    """One evaluation run: what the eval file, the `run` command's options and `raglake.evaluate`'s arguments
    set (each default is declared here, once), handed as-is to the `evaluate` flow and read by the run's plan."""

    # first: validating it registers the eval file's own metrics, which `metrics` may then name
    extensions: Annotated[Extensions, Cli(hidden=True)] = Field(
        default_factory=Extensions, description="the eval file's own metrics, rubrics and assertions"
    )

    golden: str = Field(SAMPLE_GOLDEN, description="golden set (JSONL, JSON or YAML; default: the bundled sample)")
    target: Annotated[str, Cli(hidden=True)] = Field(
        DEFAULT_TARGET,
        description="builtin[:CORPUS_DIR], http:CONFIG.yaml, replay:FILE or replay-run:RUN_ID (default: the golden "
        "file itself when it holds another tool's answers, else builtin over the sample corpus)",
    )
    k: int = Field(5, ge=1, description="top-K cut-off of the retrieval metrics")
    lake: str | None = Field(
        None, description="lake root, a folder or an fsspec URL (default $RAGLAKE_LAKE or data/lake)"
    )
    run_id: str | None = Field(None, description="run id to use (one target only)")
    labels: str | None = Field(None, description="human label annotation file (JSONL of {case_id, chunks, answers})")
    metrics: Metrics = None
    require_snippets: bool = Field(
        False, description="a chunk matches a gold support only if it holds one of its snippets"
    )
    batch_size: int | None = Field(
        None, ge=1, description="cases per capture/scoring task (default: the run's cases / 20, between 100 and 5,000)"
    )
    results: str | None = Field(
        None,
        description="where the run's staged files and Prefect's task results go: a folder or an fsspec URL "
        "(default $RAGLAKE_RESULTS or <lake>/_results)",
    )
    embedder: str | None = Field(
        None, description="sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2)"
    )
    device: DeviceName = Field(
        "auto",
        description="where the embedder runs: auto (cuda, else mps, when torch sees one, else cpu), cpu, cuda or mps",
    )
    runner: RunnerSpecText = Field(
        "thread",
        description="where scoring batches run: thread, or dask[:ADDRESS] (prefect-dask; a 2-worker LocalCluster "
        "without ADDRESS)",
    )
    orchestration: Orchestration = Field(
        "auto",
        description="how the run's tasks run: prefect (a flow run on the Prefect API of PREFECT_API_URL, else on a "
        "temporary server raglake starts), in-process (the same tasks as plain calls in this process: the same "
        f"lake rows, no Prefect API, flow run or artifacts; scoring on threads), or auto: in-process for a run of "
        f"at most {IN_PROCESS_MAX_CASES:,} cases on threads when no Prefect API is configured, else prefect",
    )
    slices: list[str] | None = Field(
        None,
        description="metadata keys of the golden cases to break results down by, each the dimension meta.KEY "
        "(breakdowns, comparisons and the gate test them like the built-in ones)",
    )
    scoring: Annotated[ScoringSettings, Cli(flatten=True)] = Field(default_factory=ScoringSettings)
    judge: JudgeField = Field(None, description="the judge of the judge metrics (none: they are skipped)")
    spot_check: SpotCheckSettings | None = Field(None, description="a second judgement of a share of the questions")
    config_file: Annotated[str | None, Cli(hidden=True)] = Field(
        None, description="the eval file the run was made from (absolute path)"
    )
    config_sha256: Annotated[str | None, Cli(hidden=True)] = Field(None, description="sha256 of its bytes")
    about: Annotated[dict[str, str] | None, Cli(hidden=True)] = Field(
        None, description="the eval file's name and description of the evaluation (recorded with the run)"
    )

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        problem = None if value is None else name_problem(value, "run id", run_id=True)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("slices")
    @classmethod
    def _slices(cls, value: list[str] | None) -> list[str] | None:
        for key in value or []:
            if not SLICE_KEY.fullmatch(key):
                raise ValueError(f"slice key {key!r}: letters, digits, '_' and '-' only (a key of the cases' metadata)")
        return list(dict.fromkeys(value)) if value else None

    @field_validator("metrics", mode="before")
    @classmethod
    def _metric_entries(cls, value: Any) -> Any:
        return [metric_entry(v) for v in value] if isinstance(value, list) else value

    @model_validator(mode="after")
    def _checked(self) -> RunSettings:
        if self.spot_check is not None and self.judge is None:
            raise ValueError("a spot-check needs a judge: give the judge's base_url and model too")
        if self.orchestration == "in-process" and RunnerSpec.parse(self.runner).kind != "thread":
            raise ValueError(
                f"orchestration in-process scores on threads: leave out runner {self.runner!r}, or use "
                "orchestration prefect (its Dask runner is prefect-dask's)"
            )
        return self

    def chosen_metrics(self) -> list[Metric]:
        """The metrics the run computes: those named, else the built-ins and the eval file's own."""
        return self.extensions.select(self.metrics)

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


def build(model: type[_Settings], **values: Any) -> Any:
    """`model` from values given by name (an API call's, a deployment's); a bad value is a ConfigError naming
    its field and its command-line option."""
    try:
        return model(**values)
    except ValidationError as e:
        raise ConfigError("; ".join(describe(model, err) for err in e.errors())) from None


def describe(model: type[BaseModel], err: Any) -> str:
    """One pydantic error as `judge.timeout_s (--judge-timeout-s): Input should be greater than 0 (got -1)`."""
    path = ".".join(str(p) for p in err["loc"])
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        known = [f.path for f in leaf_fields(model)]
        message = f"unknown setting{did_you_mean(path, known)}"
    elif err["type"] != "value_error" and "input" in err and not isinstance(err["input"], dict):
        message += f" (got {err['input']!r})"
    if not path:
        return message
    option = option_name(model, path)
    return f"{path} ({option}): {message}" if option != path else f"{path}: {message}"


BATCHES_PER_RUN = 20  # an automatic batch size aims at this many batches ...
MIN_BATCH, MAX_BATCH = 100, 5000  # ... within these bounds (memory is bounded by the batch, not the run)


def auto_batch_size(n_cases: int, given: int | None = None) -> int:
    """Cases per task: `given` when set, else n/20 between 100 and 5,000. Each task run costs Prefect
    ~20 ms of CPU, so a fixed 100 spends ~400 s on a 1M-case run; a batch of at most 5,000 keeps memory
    bounded (one batch scored at a time per worker) and a crashed run resumes losing at most a batch each."""
    if given is not None:
        return given
    return max(MIN_BATCH, min(MAX_BATCH, -(-n_cases // BATCHES_PER_RUN)))
