"""Everything a run needs, resolved and validated before any work or write happens; and the
content keys that make repeated work a cache hit."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as dt
import hashlib
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from raglake import __version__
from raglake.anchors import ANCHOR_RULE_VERSION
from raglake.embed.bertscore import BERTSCORE_VERSION
from raglake.embed.cache import default_cache_root
from raglake.embed.encoders import text_encoder
from raglake.embed.model import resolve_embedder_path
from raglake.errors import ConfigError
from raglake.golden import GoldenSet
from raglake.judge.config import JudgeConfig
from raglake.judge.stage import SpotSample, wanted_steps
from raglake.judge.steps import prompt_versions
from raglake.lake.checks import check_folder
from raglake.lake.landing import is_committed
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, metric_versions
from raglake.metrics.rules import RULES_VERSION
from raglake.metrics.variants import deeper_than
from raglake.pipeline.embedding import EmbeddingSpec, embedding_device, needs_embedder, reference_idf
from raglake.pipeline.inputs import load_inputs
from raglake.pipeline.rows import RunRecord
from raglake.pipeline.settings import DEFAULT_TARGET as DEFAULT_TARGET  # the sample's places, named here too
from raglake.pipeline.settings import SAMPLE_CAPTURES as SAMPLE_CAPTURES
from raglake.pipeline.settings import SAMPLE_DIR as SAMPLE_DIR
from raglake.pipeline.settings import SAMPLE_GOLDEN as SAMPLE_GOLDEN
from raglake.pipeline.settings import JudgeSettings, RunSettings, auto_batch_size
from raglake.pipeline.settings import sample_path as sample_path
from raglake.pipeline.staging import SCORED_TABLES, BatchRef, stage_cases
from raglake.schemas import GoldenCase
from raglake.targets import Target
from raglake.text.sentences import SPLITTER_VERSION

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the checkout; site-packages for an installed wheel


@dataclass
class RunPlan:
    run_id: str
    started_at: dt.datetime
    golden: GoldenSet
    target: Target
    lake: Lake
    metrics: list[Metric]
    config: ScoringConfig
    results_dir: str
    batch_size: int
    settings: RunSettings  # what the run was asked to do (its run id filled in)
    embedder: str | None = None
    judge: JudgeConfig | None = None  # None: judge metrics are skipped (no_judge)
    spot_check: JudgeConfig | None = None  # a second judge for the reliability spot-check
    input_seconds: float = 0.0  # loading and checking the golden set and the target (wherever that happened)

    @property
    def device(self) -> str:
        """--device: where the embedder runs (auto: cuda or mps when torch sees one, else cpu)."""
        return self.settings.device

    def spot_sample(self) -> SpotSample | None:
        """How many questions the spot-check judges twice (None: no spot-check)."""
        spot = self.settings.spot_check
        return SpotSample(spot.share, spot.minimum) if spot is not None else None

    def with_judge(self, judge: JudgeSettings | None) -> RunPlan:
        """The plan with its judge replaced (the local judge's server, once started, has an address)."""
        settings = self.settings.model_copy(update={"judge": judge})
        judge_config, spot_config = settings.judge_configs()
        return replace(self, settings=settings, judge=judge_config, spot_check=spot_config)

    @property
    def scoring_id(self) -> str:
        return "s-" + digest([self.run_id, metric_versions(self.metrics), self.config.__dict__])[:12]

    def prompt_versions(self) -> dict[str, int]:
        """The judge prompts the selected metrics may use, with their versions."""
        if self.judge is None:
            return {}
        return prompt_versions(wanted_steps(self.metrics))

    def embedding_spec(self) -> EmbeddingSpec | None:
        """The run's raglake.pipeline.embedding.EmbeddingSpec, or None when no selected metric embeds."""
        return embedding_spec(self.metrics, self.embedder, self.lake.url, self.config, self.golden.cases, self.device)

    def stage(self) -> list[BatchRef]:
        """The golden set staged batch by batch in the results location (raglake.pipeline.staging)."""
        return stage_cases(self.results_dir, self.golden.cases, self.batch_size)

    def record(
        self, finished_at: dt.datetime, n_cases: int, manifest: Any = None, embedder_key: str | None = None
    ) -> RunRecord:
        """The run's `runs` row; `manifest` is the target's index manifest when it has one."""
        return RunRecord(
            run_id=self.run_id,
            started_at=self.started_at,
            finished_at=finished_at,
            target=self.target.spec,
            target_kind=self.target.kind,
            target_name=self.target.name,
            dataset_name=self.golden.name,
            dataset_path=self.golden.path,
            dataset_hash=self.golden.content_hash,
            n_cases=n_cases,
            k=self.config.k,
            require_snippets=self.config.require_snippets,
            code_version=code_version(),
            metric_versions=metric_versions(self.metrics),
            config={
                **asdict(self.config),
                "batch_size": self.batch_size,
                "metrics": [m.name for m in self.metrics],
                "embedder_arg": self.embedder,
                "device": embedding_device(self.metrics, self.device),
                "anchor_rule_version": ANCHOR_RULE_VERSION,
                "rules_version": RULES_VERSION,
                "sentence_splitter_version": SPLITTER_VERSION,
                "bertscore_version": BERTSCORE_VERSION,
                "target_config": getattr(self.target, "recorded_config", dict)(),
                "judge": self.judge.recorded() if self.judge is not None else None,
                "spot_check": {
                    "model": self.spot_check.model,
                    "variant": self.spot_check.prompt_variant,
                    "share": self.settings.spot_check.share,
                    "minimum": self.settings.spot_check.minimum,
                }
                if self.spot_check is not None and self.settings.spot_check is not None
                else None,
                # what produced the run: every setting after the eval file and the overrides were merged
                "settings": self.settings.model_dump(mode="json", exclude={"run_id"}),
            },
            eval_file=self.settings.config_file,
            eval_file_sha256=self.settings.config_sha256,
            embedder=embedder_key or (manifest.embedding_model if manifest is not None else None),
            judge_models=",".join(dict.fromkeys(c.model for c in (self.judge, self.spot_check) if c)) or None,
            prompt_versions=self.prompt_versions(),
            index_version=manifest.index_version if manifest is not None else None,
            index_info=manifest.info() if manifest is not None else {},
        )


def embedding_spec(
    metrics: list[Metric],
    embedder: str | None,
    lake_url: str,
    config: ScoringConfig,
    cases: list[GoldenCase],
    device: str = "auto",
) -> EmbeddingSpec | None:
    """How a run (or a re-scoring of it) embeds: the embedder on its device (`device`: a --device value,
    resolved here), the lake's vector cache and, for BERTScore with idf, the idf over the run's reference
    answers; None when no metric embeds."""
    if not needs_embedder(metrics):
        return None
    root = str(default_cache_root(lake_url) / "embeddings")
    encoder = text_encoder(embedder, root, device)
    idf = None
    if config.bertscore_idf:
        idf = reference_idf(encoder, [c.reference_answer or "" for c in cases], config.bertscore_layer)
    return EmbeddingSpec(embedder, root, encoder.embedder.key, idf, encoder.embedder.device)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def code_version() -> str:
    """The package version, plus the git commit when running from a checkout (not from a wheel
    installed in some other repository's virtual environment)."""
    if not (PROJECT_ROOT / "pyproject.toml").is_file():
        return __version__
    try:
        sha = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{sha}" if sha else __version__


def new_run_id(started_at: dt.datetime, target_name: str) -> str:
    return f"r-{started_at:%Y%m%d-%H%M%S}-{target_name}-{uuid.uuid4().hex[:6]}"


def results_dir(lake: Lake, explicit: str | None = None) -> str:
    """Where Prefect persists task results: --results, $RAGLAKE_RESULTS, else <lake>/_results."""
    return explicit or os.environ.get("RAGLAKE_RESULTS") or f"{lake.url.rstrip('/')}/_results"


def checked_results_dir(lake: Lake, explicit: str | None = None) -> str:
    """results_dir, refused in one line (saying where it was given) when it was given and is a local folder raglake
    cannot write: a file, a device, below a file, or read-only (before, the first staged batch failed, naming
    neither). The default, inside the lake, is the lake's check (a read-only lake is said as such)."""
    found = results_dir(lake, explicit)
    if explicit:
        where, fix = "--results (or results: in the eval file)", "give --results a folder (it is created when missing)"
    elif os.environ.get("RAGLAKE_RESULTS"):
        where, fix = "$RAGLAKE_RESULTS", "set $RAGLAKE_RESULTS to a folder (it is created when missing)"
    else:
        return found
    check_folder(found, "the results location", fix, given=f" (given by {where})", write=True)
    return found


_PLANNED: contextvars.ContextVar[tuple[RunPlan, ...]] = contextvars.ContextVar("raglake_planned", default=())


@contextlib.contextmanager
def planned(*plans: RunPlan) -> Iterator[None]:
    """The runs planned by the caller (the command line, the API), for the flows it calls in this context:
    a flow takes its run's plan here instead of loading and checking its inputs a second time. A flow run by a
    deployment finds none and plans itself."""
    token = _PLANNED.set(plans)
    try:
        yield
    finally:
        _PLANNED.reset(token)


def plan_for(settings: RunSettings) -> RunPlan:
    """The run's plan: the one made by the caller for this run id, else a new one."""
    found = [p for p in _PLANNED.get() if settings.run_id is not None and p.run_id == settings.run_id]
    return found[0] if found else plan_run(settings)


def plan_run(settings: RunSettings) -> RunPlan:
    """Load and check every input; raises before anything is written. The plan's settings carry its run id."""
    try:
        config = settings.scoring_config()
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    the_lake = Lake(settings.lake)
    results = checked_results_dir(the_lake, settings.results)
    t0 = time.perf_counter()
    golden_set, the_target = load_inputs(settings, the_lake)
    input_seconds = time.perf_counter() - t0
    chosen = settings.chosen_metrics()
    deep = deeper_than(chosen, config.k)
    if deep is not None:
        raise ConfigError(
            f"metric {deep.name} looks deeper than the run's k = {config.k}, the number of chunks the run asks its "
            f"target for: raise the run's k (a metric at its own k may only look shallower)"
        )
    if settings.embedder is not None or any("vectors" in m.inputs or "token_embeddings" in m.inputs for m in chosen):
        resolve_embedder_path(settings.embedder)  # a bad --embedder fails here, before any work
    started = dt.datetime.now(dt.timezone.utc)
    if settings.run_id is not None and is_committed(the_lake, settings.run_id):
        raise ConfigError(f"run {settings.run_id} is already in the lake at {the_lake.url}; choose another --run-id")
    judge_config, spot_config = settings.judge_configs()
    run_id = settings.run_id or new_run_id(started, the_target.name)
    return RunPlan(
        run_id=run_id,
        started_at=started,
        golden=golden_set,
        target=the_target,
        lake=the_lake,
        metrics=chosen,
        config=config,
        results_dir=results,
        batch_size=auto_batch_size(len(golden_set.cases), settings.batch_size),
        embedder=settings.embedder,
        settings=settings.model_copy(update={"run_id": run_id}),
        judge=judge_config,
        spot_check=spot_config,
        input_seconds=input_seconds,
    )


def capture_key(target: Target, batch: BatchRef, run_id: str) -> str:
    """A deterministic target's captures are reused across runs; a live one's only within its run.
    Made from bytes: the target's content key and the sha256 of the batch's staged cases."""
    scope = None if target.deterministic else run_id
    return "capture-" + digest([target.content_key(), scope, batch.cases_key])[:32]


def journal_path(lake: Lake, run_id: str) -> str:
    return str(default_cache_root(lake.url) / "captures" / f"{run_id}.jsonl")


def scoring_token(
    versions: dict[str, str],
    config: ScoringConfig,
    known_docs: frozenset[str],
    embedding: Any = None,
) -> str:
    """What of a run's settings changes its scores: metric versions, scoring settings, rule versions,
    the target's known documents and the embedder (computed once per run, not per batch); and the columns
    of the tables a scored batch stages, so that a batch staged before a column existed (the cases'
    `cost_usd`) is scored again rather than landed without it."""
    return digest(
        [
            versions,
            asdict(config),
            sorted(known_docs),
            ANCHOR_RULE_VERSION,
            RULES_VERSION,
            SPLITTER_VERSION,
            BERTSCORE_VERSION,
            embedding.cache_token() if embedding is not None else None,
            [TABLES[name].schema.names for name in SCORED_TABLES],
        ]
    )


def score_key(batch: BatchRef, token: str) -> str:
    """Batch content (the staged files' sha256: cases, captures, judge outcomes) + the run's scoring
    token: equal keys, equal scores."""
    return "score-" + digest([batch.cases_key, batch.captures_key, batch.judged_key, token])[:32]
