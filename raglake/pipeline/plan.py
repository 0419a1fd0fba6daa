"""Everything a run needs, resolved and validated before any work or write happens; and the
content keys that make repeated work a cache hit."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import subprocess
import threading
import time
import uuid
from dataclasses import asdict, dataclass
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
from raglake.judge.stage import wanted_steps
from raglake.judge.steps import prompt_versions
from raglake.lake.landing import is_committed
from raglake.lake.store import Lake
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, metric_versions, select_metrics
from raglake.metrics.rules import RULES_VERSION
from raglake.pipeline.embedding import EmbeddingSpec, embedding_device, needs_embedder, reference_idf
from raglake.pipeline.inputs import load_inputs
from raglake.pipeline.rows import RunRecord
from raglake.pipeline.settings import DEFAULT_TARGET as DEFAULT_TARGET  # the sample's places, named here too
from raglake.pipeline.settings import SAMPLE_CAPTURES as SAMPLE_CAPTURES
from raglake.pipeline.settings import SAMPLE_DIR as SAMPLE_DIR
from raglake.pipeline.settings import SAMPLE_GOLDEN as SAMPLE_GOLDEN
from raglake.pipeline.settings import RunSettings, auto_batch_size
from raglake.pipeline.settings import sample_path as sample_path
from raglake.pipeline.staging import BatchRef, stage_cases
from raglake.schemas import GoldenCase
from raglake.targets import Target
from raglake.targets.replay import file_sha256
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
    embedder: str | None = None
    judge: JudgeConfig | None = None  # None: judge metrics are skipped (no_judge)
    spot_check: JudgeConfig | None = None  # a second judge for the reliability spot-check
    spot_share: float = 0.1
    spot_min: int = 10
    device: str = "auto"  # --device: where the embedder runs (auto: cuda or mps when torch sees one, else cpu)
    input_seconds: float = 0.0  # loading and checking the golden set and the target (wherever that happened)

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
                    "share": self.spot_share,
                    "minimum": self.spot_min,
                }
                if self.spot_check is not None
                else None,
            },
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


class CheckedInputs:
    """Golden sets (labels applied) and targets already loaded and checked in this process, so that a
    run's inputs are read and validated once: the command line checks every target before Prefect
    starts and keeps what it loaded here; the flow then takes it (once) instead of loading it again.
    Keyed by the golden and label files' bytes (sha256) and the settings that build the target;
    bounded, and cleared by the command line when its runs end. A flow run by a deployment finds
    nothing here and loads its inputs itself."""

    def __init__(self, capacity: int = 8):
        self.capacity = capacity
        self._items: list[tuple[str, GoldenSet, Target, float]] = []  # oldest first; a target given twice: twice
        self._lock = threading.Lock()

    @staticmethod
    def key(settings: RunSettings) -> str:
        files = [
            (p, file_sha256(Path(p)) if Path(p).is_file() else None) for p in (settings.golden, settings.labels) if p
        ]
        return digest([files, settings.target, settings.lake, settings.embedder, settings.k])

    def put(self, settings: RunSettings, golden: GoldenSet, target: Target, seconds: float = 0.0) -> None:
        """Keep what was loaded, and how long loading it took (the run records it as its `inputs` stage)."""
        with self._lock:
            self._items.append((self.key(settings), golden, target, seconds))
            del self._items[: max(0, len(self._items) - self.capacity)]

    def take(self, settings: RunSettings) -> tuple[GoldenSet, Target, float] | None:
        """What was checked for these settings and the seconds it took (removed: it serves one run), or None."""
        if not self._items:
            return None
        key = self.key(settings)
        with self._lock:
            for i, (k, golden, target, seconds) in enumerate(self._items):
                if k == key:
                    del self._items[i]
                    return golden, target, seconds
        return None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __reduce__(self) -> tuple[Any, ...]:
        """Process-local: a copy sent to another process (a Dask worker unpickling a flow) starts empty."""
        return CheckedInputs, (self.capacity,)


CHECKED = CheckedInputs()  # the process's checked inputs: filled by the command line, taken by the flow


def plan_run(settings: RunSettings, checked: CheckedInputs | None = None, *, keep: bool = False) -> RunPlan:
    """Load and check every input; raises before anything is written. With `checked`, inputs checked
    earlier in this process are taken from it (and with `keep`, what this call loads is kept in it)."""
    try:
        config = settings.scoring_config()
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    the_lake = Lake(settings.lake)
    found = checked.take(settings) if checked is not None and not keep else None
    if found is None:
        t0 = time.perf_counter()
        golden_set, the_target = load_inputs(settings, the_lake)
        input_seconds = time.perf_counter() - t0
    else:
        golden_set, the_target, input_seconds = found
    if keep and checked is not None:
        checked.put(settings, golden_set, the_target, input_seconds)
    chosen = select_metrics(settings.metrics)
    if settings.embedder is not None or any("vectors" in m.inputs or "token_embeddings" in m.inputs for m in chosen):
        resolve_embedder_path(settings.embedder)  # a bad --embedder fails here, before any work
    started = dt.datetime.now(dt.timezone.utc)
    if settings.run_id is not None and is_committed(the_lake, settings.run_id):
        raise ConfigError(f"run {settings.run_id} is already in the lake at {the_lake.url}; choose another --run-id")
    judge_config, spot_config = settings.judge_configs()
    spot = settings.spot_check
    return RunPlan(
        run_id=settings.run_id or new_run_id(started, the_target.name),
        started_at=started,
        golden=golden_set,
        target=the_target,
        lake=the_lake,
        metrics=chosen,
        config=config,
        results_dir=results_dir(the_lake, settings.results),
        batch_size=auto_batch_size(len(golden_set.cases), settings.batch_size),
        embedder=settings.embedder,
        judge=judge_config,
        spot_check=spot_config,
        spot_share=spot.share if spot else 0.1,
        spot_min=spot.minimum if spot else 10,
        device=settings.device,
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
    the target's known documents and the embedder (computed once per run, not per batch)."""
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
        ]
    )


def score_key(batch: BatchRef, token: str) -> str:
    """Batch content (the staged files' sha256: cases, captures, judge outcomes) + the run's scoring
    token: equal keys, equal scores."""
    return "score-" + digest([batch.cases_key, batch.captures_key, batch.judged_key, token])[:32]
