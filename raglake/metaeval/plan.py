"""What a meta-evaluation needs, resolved before any work: its settings, the labelled items (converted from
the shared sets or read from the user's JSONL files), a fixed-seed subsample of each large data set, and
the items as golden cases + captures staged for the scoring pipeline, one group per yardstick (each group
is scored with the metrics of its yardstick only, so no judge call is spent on a metric that cannot be
held against the group's labels)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator

from raglake.errors import ConfigError, UnknownNameError
from raglake.lake.store import Lake
from raglake.metaeval.download import cache_folder, missing
from raglake.metaeval.items import LABEL_KINDS, LabelledItem, read_items, write_items
from raglake.metaeval.sources import SOURCES, convert
from raglake.metrics.context import ScoringConfig
from raglake.metrics.extensions import Extensions
from raglake.metrics.registry import Metric
from raglake.pipeline.fields import Cli
from raglake.pipeline.judge_settings import JudgeField
from raglake.pipeline.plan import PROJECT_ROOT, checked_results_dir
from raglake.pipeline.settings import DeviceName, MetricNames, ScoringSettings, _Settings, name_problem
from raglake.pipeline.staging import BatchRef, Store, stage_pairs
from raglake.schemas import Capture, GoldenCase

DEFAULT_SOURCE = PROJECT_ROOT.parent / "shared" / "metaeval"  # beside a checkout
NO_QUESTION = "(no question given)"  # a golden case needs one; no metric of a similarity yardstick reads it


class MetaevalSettings(_Settings):
    """One meta-evaluation: which labelled sets, how many items of each, which metrics, and which judge."""

    # first: its validator registers the eval file's metrics, which `metrics` may then name
    extensions: Annotated[Extensions, Cli(hidden=True)] = Field(
        default_factory=Extensions, description="the eval file's own metrics and rubrics (those with a yardstick)"
    )
    data: list[str] | None = Field(
        None, description="labelled JSONL file(s) (docs/metaeval.md); default: the shared sets, converted"
    )
    source: str | None = Field(
        None,
        description="the folder of the public sets (default: ../shared/metaeval beside a checkout, else where "
        "--download puts them: ~/.cache/raglake/metaeval)",
    )
    datasets: list[str] | None = Field(None, description="only these data sets (comma-separated)")
    max_items: int | None = Field(
        400, ge=0, description="items per data set: a fixed-seed sample of whole groups (0: every item)"
    )
    seed: int = Field(0, description="seed of the sample and of the bootstrap")
    resamples: int = Field(1000, ge=100, description="bootstrap resamples per interval")
    metrics: Annotated[MetricNames, Cli(short="-m")] = Field(
        None, description="only these metrics (comma-separated; default: every metric with a yardstick)"
    )
    lake: str | None = Field(None, description="lake root (default $RAGLAKE_LAKE or data/lake)")
    results: str | None = Field(None, description="where staged files go (default $RAGLAKE_RESULTS or <lake>/_results)")
    metaeval_id: str | None = Field(None, description="id of this meta-evaluation")
    embedder: str | None = Field(
        None, description="sentence-transformers model folder (default: the packaged all-MiniLM-L6-v2)"
    )
    device: DeviceName = Field("auto", description="where the embedder runs: auto, cpu, cuda or mps")
    batch_size: int = Field(200, ge=1, description="items per scoring task")
    scoring: Annotated[ScoringSettings, Cli(flatten=True)] = Field(default_factory=ScoringSettings)
    judge: JudgeField = Field(None, description="the judge of the judge metrics (none: they are skipped)")

    @field_validator("extensions")
    @classmethod
    def _activated(cls, value: Extensions) -> Extensions:
        value.activate()  # a rubric or a metric of the user's with a yardstick is measured like a built-in one
        return value

    @field_validator("metaeval_id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        problem = None if value is None else name_problem(value, "metaeval id", run_id=True)  # `--show latest` selects
        if problem:
            raise ValueError(problem)
        return value


@dataclass(frozen=True)
class ScoreGroup:
    """The items of one yardstick, staged as distinct cases, and the metrics held against them."""

    yardstick: str
    batches: list[BatchRef]
    metrics: list[Metric]
    config: ScoringConfig


@dataclass
class MetaevalPlan:
    metaeval_id: str
    created_at: dt.datetime
    lake: Lake
    results_dir: str
    items_path: str  # the sampled items, all data sets, as labelled JSONL in the results location
    totals: dict[str, int]  # data set -> items before sampling
    sources: dict[str, str]  # data set -> where its items came from
    groups: list[ScoreGroup]


def case_key(question: str, answer: str, contexts: list[str], reference: str | None) -> str:
    """The case id of one distinct (question, answer, contexts, reference): items that share them share a case."""
    data = json.dumps([question, answer, contexts, reference], ensure_ascii=False)
    return "c-" + hashlib.sha256(data.encode("utf-8")).hexdigest()[:20]


def item_cases(item: LabelledItem) -> list[tuple[str, GoldenCase, Capture]]:
    """The case(s) an item is scored as: its answer, and for a preference item answer_b too."""
    out = []
    for answer in (item.answer, item.answer_b) if item.answer_b is not None else (item.answer,):
        cid = case_key(item.question, answer, item.contexts, item.reference)
        retrieved = [
            {"rank": i + 1, "rel_path": f"context/{i + 1}", "heading_path": [], "text": text}
            for i, text in enumerate(item.contexts)
        ]
        case = GoldenCase(id=cid, question=item.question.strip() or NO_QUESTION, reference_answer=item.reference)
        out.append((cid, case, Capture(case_id=cid, answer=answer, retrieved=retrieved)))
    return out


def sample(items: list[LabelledItem], max_items: int | None, seed: int) -> list[LabelledItem]:
    """Whole groups in a fixed pseudo-random order (sha256 of seed and group) until `max_items` are taken:
    the same seed takes the same groups from data sets that share them (RAGChecker's three aspects)."""
    if max_items is None or len(items) <= max_items:
        return items
    by_group: dict[str, list[LabelledItem]] = defaultdict(list)
    for item in items:
        by_group[item.cluster].append(item)
    order = sorted(by_group, key=lambda g: hashlib.sha256(f"{seed}:{g}".encode()).hexdigest())
    taken: list[LabelledItem] = []
    for g in order:
        if len(taken) >= max_items:
            break
        taken.extend(by_group[g])
    return taken


def source_root(source: str | None) -> Path:
    """--source, else ../shared/metaeval beside a checkout, else the folder --download writes to."""
    if source:
        return Path(source)
    return DEFAULT_SOURCE if DEFAULT_SOURCE.is_dir() else cache_folder()


def check_data(settings: MetaevalSettings) -> None:
    """Before any work (and before Prefect starts): the labelled data is there, or one ConfigError that says
    what to pass."""
    if settings.data:
        absent = [p for p in settings.data if not Path(p).is_file()]
        if absent:
            raise ConfigError(f"--data {absent[0]}: no such file (labelled items as JSONL, docs/metaeval.md)")
        return
    root = source_root(settings.source)
    names = [n for n in SOURCES if not settings.datasets or n in settings.datasets]
    lacking = missing(root, names)
    if not root.is_dir() or lacking:
        fetch = "raglake metaeval --download" + (f" --source {root}" if settings.source else "")
        what = f"no labelled data at {root}" if not root.is_dir() else f"{root} lacks {', '.join(lacking)}"
        raise ConfigError(
            f"{what}: run `{fetch}` (the public sets, checked by sha256), or give --data FILE.jsonl or "
            "--source DIR (docs/metaeval.md)"
        )


def load_sets(settings: MetaevalSettings) -> tuple[dict[str, list[LabelledItem]], dict[str, str]]:
    """Every data set's items (before sampling) and where each came from."""
    check_data(settings)
    sets: dict[str, list[LabelledItem]] = {}
    sources: dict[str, str] = {}
    if settings.data:
        for path in settings.data:
            for item in read_items(path):
                sets.setdefault(item.dataset, []).append(item)
                sources[item.dataset] = str(path)
    else:
        root = source_root(settings.source)
        names = [n for n in SOURCES if not settings.datasets or n in settings.datasets]
        sets = convert(root, names)
        sources = {n: f"{root}:{n}" for n in sets}
    wanted = settings.datasets or list(sets)
    unknown = [n for n in wanted if n not in sets]
    if unknown:
        raise UnknownNameError("data set", unknown[0], sets if settings.data else SOURCES)
    for name in wanted:
        kinds = {i.label_kind for i in sets[name]}
        if len(kinds) > 1:
            raise ConfigError(f"data set {name!r} mixes label kinds {sorted(kinds)}: one kind per data set")
    return {n: sets[n] for n in wanted}, {n: sources[n] for n in wanted}


def plan_metaeval(settings: MetaevalSettings) -> MetaevalPlan:
    """Load, sample and stage the labelled items; nothing is scored yet."""
    lake = Lake(settings.lake)
    created = dt.datetime.now(dt.timezone.utc)
    metaeval_id = settings.metaeval_id or f"m-{created:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
    sets, sources = load_sets(settings)
    sampled = {n: sample(items, settings.max_items or None, settings.seed) for n, items in sets.items()}
    results = checked_results_dir(lake, settings.results)
    items_path = f"metaeval/{metaeval_id}/items.jsonl"
    everything = [i for items in sampled.values() for i in items]
    Store(results).put(items_path, "".join(i.model_dump_json() + "\n" for i in everything).encode("utf-8"))
    groups = []
    for yardstick in dict.fromkeys(LABEL_KINDS[i.label_kind] for i in everything):
        chosen = [i for i in everything if LABEL_KINDS[i.label_kind] == yardstick]
        candidates = settings.extensions.select(settings.metrics)
        metrics = [m for m in candidates if yardstick in m.yardsticks]
        if not metrics:
            continue
        cases = {cid: (case, capture) for i in chosen for cid, case, capture in item_cases(i)}
        pairs = list(cases.values())
        k = max([1, *(len(i.contexts) for i in chosen)])
        config = settings.scoring.config(k, False)
        batches = stage_pairs(
            results, [p[0] for p in pairs], [p[1] for p in pairs], settings.batch_size, f"metaeval:{yardstick}"
        )
        groups.append(ScoreGroup(yardstick, batches, metrics, config))
    if not groups:
        raise ConfigError("none of the selected metrics can be held against the labelled data's kinds of label")
    totals = {n: len(items) for n, items in sets.items()}
    return MetaevalPlan(metaeval_id, created, lake, results, items_path, totals, sources, groups)


def save_items(path: str | Path, settings: MetaevalSettings) -> dict[str, int]:
    """Write the (unsampled) data sets as labelled JSONL files, one per data set, under `path`."""
    sets, _ = load_sets(settings)
    for name, items in sets.items():
        write_items(Path(path) / f"{name}.jsonl", items)
    return {n: len(items) for n, items in sets.items()}
