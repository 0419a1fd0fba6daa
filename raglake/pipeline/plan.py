"""Everything a run needs, resolved and validated before any work or write happens; and the
content keys that make repeated work a cache hit."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import uuid
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from raglake import __version__
from raglake.anchors import ANCHOR_RULE_VERSION
from raglake.embed.bertscore import BERTSCORE_VERSION
from raglake.errors import ConfigError
from raglake.golden import GoldenSet, load_golden, load_labels
from raglake.lake.landing import RunRecord, is_committed
from raglake.lake.store import Lake
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import Metric, metric_versions, select_metrics
from raglake.metrics.rules import RULES_VERSION
from raglake.schemas import Capture, GoldenCase
from raglake.targets import Target, make_target
from raglake.text.sentences import SPLITTER_VERSION

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the checkout; site-packages for an installed wheel
SAMPLE_DIR = Path(str(resources.files("raglake.sample")))  # data/ in a checkout, raglake/sample/ in a wheel


def sample_path(*parts: str) -> str:
    """A file of the bundled sample, relative to the working directory when it lies beneath it."""
    path = SAMPLE_DIR.joinpath(*parts)
    rel = os.path.relpath(path)
    return path.as_posix() if rel.startswith("..") else Path(rel).as_posix()


SAMPLE_GOLDEN = sample_path("golden", "sample.jsonl")
SAMPLE_CAPTURES = tuple(f"replay:{sample_path('captures', m + '.jsonl')}" for m in ("basic_search", "local_search"))
DEFAULT_TARGET = f"builtin:{sample_path('corpus')}"
_RUN_ID = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,127}$")


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
    judge: Any = None  # raglake.judge.config.JudgeConfig, or None: judge metrics are skipped (no_judge)
    spot_check: Any = None  # a second JudgeConfig for the reliability spot-check
    spot_share: float = 0.1
    spot_min: int = 10

    @property
    def scoring_id(self) -> str:
        return "s-" + digest([self.run_id, metric_versions(self.metrics), self.config.__dict__])[:12]

    def prompt_versions(self) -> dict[str, int]:
        """The judge prompts the selected metrics may use, with their versions."""
        if self.judge is None:
            return {}
        from raglake.judge.prompts import get_prompt
        from raglake.judge.stage import wanted_steps
        from raglake.judge.steps import STEPS

        return {p: get_prompt(p).version for step in sorted(wanted_steps(self.metrics)) for p in STEPS[step].prompts}

    def embedding_spec(self) -> Any:
        """The run's raglake.embed.prepare.EmbeddingSpec, or None when no selected metric embeds."""
        from raglake.embed.cache import default_cache_root
        from raglake.embed.prepare import EmbeddingSpec, needs_embedder, reference_idf, text_encoder

        if not needs_embedder(self.metrics):
            return None
        root = str(default_cache_root(self.lake.url) / "embeddings")
        encoder = text_encoder(self.embedder, root)
        idf = None
        if self.config.bertscore_idf:
            idf = reference_idf(encoder, [c.reference_answer or "" for c in self.golden.cases], self.config.bertscore_layer)
        return EmbeddingSpec(self.embedder, root, encoder.embedder.key, idf)

    def batches(self) -> list[list[GoldenCase]]:
        cases = self.golden.cases
        return [cases[i : i + self.batch_size] for i in range(0, len(cases), self.batch_size)]

    def record(self, finished_at: dt.datetime, n_cases: int, manifest: Any = None, embedder_key: str | None = None) -> RunRecord:
        """The run's `runs` row; `manifest` is the target's index manifest when it has one."""
        return RunRecord(
            run_id=self.run_id, started_at=self.started_at, finished_at=finished_at,
            target=self.target.spec, target_kind=self.target.kind, target_name=self.target.name,
            dataset_name=self.golden.name, dataset_path=self.golden.path, dataset_hash=self.golden.content_hash,
            n_cases=n_cases, k=self.config.k, require_snippets=self.config.require_snippets,
            code_version=code_version(), metric_versions=metric_versions(self.metrics),
            config={**asdict(self.config), "batch_size": self.batch_size, "metrics": [m.name for m in self.metrics],
                    "embedder_arg": self.embedder,
                    "anchor_rule_version": ANCHOR_RULE_VERSION, "rules_version": RULES_VERSION,
                    "sentence_splitter_version": SPLITTER_VERSION, "bertscore_version": BERTSCORE_VERSION,
                    "target_config": getattr(self.target, "recorded_config", dict)(),
                    "judge": self.judge.recorded() if self.judge is not None else None,
                    "spot_check": {"model": self.spot_check.model, "share": self.spot_share, "minimum": self.spot_min}
                    if self.spot_check is not None else None},
            embedder=embedder_key or (manifest.embedding_model if manifest is not None else None),
            judge_models=",".join(c.model for c in (self.judge, self.spot_check) if c is not None) or None,
            prompt_versions=self.prompt_versions(),
            index_version=manifest.index_version if manifest is not None else None,
            index_info=manifest.info() if manifest is not None else {},
        )


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
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{sha}" if sha else __version__


def new_run_id(started_at: dt.datetime, target_name: str) -> str:
    return f"r-{started_at:%Y%m%d-%H%M%S}-{target_name}-{uuid.uuid4().hex[:6]}"


def result_storage(results: str) -> Any:
    """Prefect's result storage for a results location: a local folder, or any fsspec URL
    (s3://bucket/results, gs://…, memory://…) through Prefect's RemoteFileSystem."""
    if "://" in results and not results.startswith("file://"):
        from prefect.filesystems import RemoteFileSystem

        # Prefect wants remote result storage saved as a block: one per location, named by its hash
        basepath = results.rstrip("/")
        block = RemoteFileSystem(basepath=basepath)
        block.save(f"raglake-results-{hashlib.sha256(basepath.encode()).hexdigest()[:12]}", overwrite=True)
        return block
    return Path(results.removeprefix("file://"))


def results_dir(lake: Lake, explicit: str | None = None) -> str:
    """Where Prefect persists task results: --results, $RAGLAKE_RESULTS, else <lake>/_results."""
    return explicit or os.environ.get("RAGLAKE_RESULTS") or f"{lake.url.rstrip('/')}/_results"


def plan_run(
    *,
    golden: str | Path = SAMPLE_GOLDEN,
    target: str,
    lake: str | None = None,
    k: int = 5,
    run_id: str | None = None,
    labels: str | None = None,
    metrics: list[str] | None = None,
    require_snippets: bool = False,
    batch_size: int = 100,
    results: str | None = None,
    embedder: str | None = None,
    scoring: dict[str, Any] | None = None,
    judge: dict[str, Any] | None = None,
    spot_check: dict[str, Any] | None = None,
) -> RunPlan:
    """Load and check every input; raises before anything is written. `scoring` holds the other
    ScoringConfig settings (theta_s, theta_h, bertscore_layer, bertscore_idf)."""
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    try:
        config = ScoringConfig(k=k, require_snippets=require_snippets, **(scoring or {}))
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e)) from None
    the_lake = Lake(lake)
    golden_set = load_golden(golden)
    if labels:
        golden_set = load_labels(labels, golden_set)
    the_target = make_target(target, the_lake, embedder=embedder, k=k)
    the_target.check(golden_set)
    chosen = select_metrics(metrics)
    if embedder is not None or any("vectors" in m.inputs or "token_embeddings" in m.inputs for m in chosen):
        from raglake.embed.model import resolve_embedder_path

        resolve_embedder_path(embedder)  # a bad --embedder fails here, before any work
    started = dt.datetime.now(dt.timezone.utc)
    if run_id is not None:
        if not _RUN_ID.match(run_id):
            raise ConfigError(f"run id {run_id!r} must start with a letter and use only letters, digits, '.', '_' and '-'")
        if is_committed(the_lake, run_id):
            raise ConfigError(f"run {run_id} is already in the lake at {the_lake.url}; choose another --run-id")
    judge_config, spot_config, spot = _judges(judge, spot_check)
    return RunPlan(
        run_id=run_id or new_run_id(started, the_target.name), started_at=started, golden=golden_set,
        target=the_target, lake=the_lake, metrics=chosen, config=config,
        results_dir=results_dir(the_lake, results), batch_size=batch_size, embedder=embedder,
        judge=judge_config, spot_check=spot_config, spot_share=spot.get("share", 0.1), spot_min=spot.get("minimum", 10),
    )


def _judges(judge: dict[str, Any] | None, spot_check: dict[str, Any] | None) -> tuple[Any, Any, dict[str, Any]]:
    """JudgeConfigs from flow parameters (plain dicts, so deployments can pass them)."""
    if not judge:
        if spot_check:
            raise ConfigError("a spot-check needs a judge: give --judge-base-url and --judge-model too")
        return None, None, {}
    from raglake.judge.config import JudgeConfig, load_prices

    try:
        config = JudgeConfig(**judge, prices=load_prices())
    except TypeError as e:
        raise ConfigError(f"bad judge settings: {e}") from None
    spot = dict(spot_check or {})
    second = None
    if spot.get("model"):
        second = config.with_model(spot["model"], spot.get("base_url"))
    if not 0 < spot.get("share", 0.1) <= 1:
        raise ConfigError(f"spot-check share must lie in (0, 1], got {spot.get('share')}")
    return config, second, spot


def capture_key(target: Target, cases: list[GoldenCase], run_id: str) -> str:
    """A deterministic target's captures are reused across runs; a live one's only within its run."""
    scope = None if target.deterministic else run_id
    return "capture-" + digest([target.content_key(), scope, [c.model_dump(mode="json") for c in cases]])[:32]


def journal_path(lake: Lake, run_id: str) -> str:
    from raglake.embed.cache import default_cache_root

    return str(default_cache_root(lake.url) / "captures" / f"{run_id}.jsonl")


def score_key(cases: list[GoldenCase], captures: list[Capture], versions: dict[str, str], config: ScoringConfig,
              known_docs: frozenset[str], embedding: Any = None, judge: dict[str, dict[str, Any]] | None = None) -> str:
    """Batch content + metric versions + scoring settings + rule versions + embedder + judge outcomes:
    equal keys, equal scores."""
    judged = None if judge is None else {cid: {step: asdict(o) for step, o in steps.items()} for cid, steps in judge.items()}
    return "score-" + digest([
        [c.model_dump(mode="json") for c in cases], [c.model_dump(mode="json") for c in captures],
        versions, asdict(config), sorted(known_docs), ANCHOR_RULE_VERSION, RULES_VERSION, SPLITTER_VERSION,
        BERTSCORE_VERSION, embedding.cache_token() if embedding is not None else None, judged,
    ])[:32]
