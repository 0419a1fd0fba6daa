"""The metric registry: every metric is registered once, with its metadata, next to its function.
Flows, the CLI, the docs table and the SQL `metric_registry` view all read this registry
(the lake's landed `metrics` table is its copy per scoring)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

from raglake.embed.texts import TEXT_KINDS
from raglake.errors import ConfigError, UnknownNameError
from raglake.metrics.steps import JudgeStep

# metric_error: a user's metric raised on the case (its reason holds the exception's type and message)
STATUSES = ("ok", "undefined", "judge_error", "parse_error", "skipped", "metric_error")
# custom: a user's own Python metric (raglake.metric); assertion: a deterministic check of the eval file or
# of a question's own `assert:` list; a user's judge rubric is a judge metric
FAMILIES = ("retrieval", "label", "abstention", "embedding", "judge", "operational", "custom", "assertion")
# where a metric is defined: raglake itself, a user's plugin module, an installed package's entry point
# (group `raglake.metrics`), a rubric or an assertion of an eval file
ORIGINS = ("builtin", "plugin", "entry_point", "rubric", "assertion", "variant")
LEVELS = ("case", "run")
APPLIES_TO = ("all", "answerable", "unanswerable")
# what people label that a metric can be held against (`raglake metaeval`, docs/metaeval.md): graded
# similarity to a reference, support of a sentence by its contexts, correctness against a reference
YARDSTICKS = ("similarity", "support", "correctness")
# the values a metric can take, by its scale (Metric.bounds): a named scale, or "LOW-HIGH" ("0-5", "1-5")
SCALE_BOUNDS = {"binary": (0.0, 1.0), "cosine": (-1.0, 1.0)}
_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class SentenceScore:
    """One answer sentence's score inside a case-level metric (the lake's `sentence_scores` table)."""

    index: int  # 0-based, in the order the sentence splitter gives
    sentence: str
    value: float
    flagged: bool | None = None  # over the metric's threshold
    best_cos: float | None = None  # the embedding part: best cosine to a context sentence
    coverage: float | None = None  # the lexical part: share of its content words in the contexts
    best_rank: int | None = None  # rank of the chunk holding its best-matching context sentence


@dataclass(frozen=True)
class Score:
    """One metric value for one case: only `ok` carries a number; every other status carries NaN and a reason."""

    value: float
    status: str = "ok"
    reason: str | None = None
    source: str | None = None  # label source (human, rule, judge:<model>) where the value comes from labels
    model: str | None = None  # the embedder (name@weights-hash[:layer]) that produced the value
    judge_model: str | None = None
    prompt_id: str | None = None
    prompt_version: str | None = None
    judge_call: str | None = None  # call_key of the judge call behind the value (judge_calls table)
    detail: tuple[SentenceScore, ...] = ()  # per-sentence scores behind the value, where the metric has them

    @staticmethod
    def ok(
        value: float,
        source: str | None = None,
        reason: str | None = None,
        model: str | None = None,
        **judge: str | None,
    ) -> Score:
        value = float(value)
        if math.isnan(value):
            raise ValueError("an ok score needs a number; use Score.undefined(reason)")
        return Score(value, "ok", reason, source, model, **judge)

    @staticmethod
    def failed(status: str, reason: str | None, **judge: str | None) -> Score:
        """A judge that did not deliver: judge_error, parse_error or skipped (with the call's metadata)."""
        if status not in ("judge_error", "parse_error", "skipped", "undefined"):
            raise ValueError(f"not a failure status: {status}")
        return Score(math.nan, status, reason or status, **judge)

    @staticmethod
    def undefined(reason: str) -> Score:
        return Score(math.nan, "undefined", reason)

    @staticmethod
    def skipped(reason: str) -> Score:
        return Score(math.nan, "skipped", reason)


@dataclass(frozen=True)
class RunValue:
    """One run-level figure: a metric, optionally for one stage, over n cases."""

    metric: str
    value: float
    stage: str | None = None
    n: int = 0
    unit: str | None = None


@dataclass(frozen=True)
class Metric:
    name: str
    family: str
    version: str
    scale: str
    higher_is_better: bool | None
    level: str
    seed: str
    description: str
    fn: Callable[..., Any] = field(repr=False, compare=False)
    applies_to: str = "all"
    inputs: tuple[str, ...] = ()
    steps: tuple[JudgeStep, ...] = ()  # the judge steps whose outcomes the metric reads
    # shown first: a case-level metric is charted by slice in the report and is a default column of the CLI's
    # tables; a run-level one is among the run figures of the flow's summary
    headline: bool = False
    worst_cases: bool = False  # the report lists the run's worst cases by it
    # the kinds of text whose vectors it reads from the run's vector table (raglake.embed.texts.TEXT_KINDS):
    # the embedding stage encodes the union over the selected metrics, nothing else
    texts: tuple[str, ...] = ()
    # the SQL view (sql/views/) that shows it on its seed's presentation scale (1-5, 0-100, letter grade),
    # derived from the stored value, never computed twice; the view picks its metrics by this name
    scale_view: str | None = None
    # the human labels it can be held against (YARDSTICKS): `raglake metaeval` picks its metrics by this
    yardsticks: tuple[str, ...] = ()
    # its vectorised form over a whole batch (raglake.metrics.columnar), set by @columnar_form beside the metric
    columnar: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    origin: str = "builtin"  # ORIGINS
    source: str | None = None  # where a user's metric is defined: a file (and line), a package, an eval file
    # another metric that gives the same figure (this one a presentation of it): both are scored and landed,
    # the CLI's tables, the report and Result.summary show only the other when a run has both
    same_as: str | None = None

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """The lowest and highest value the metric can take, from its scale ((None, None): unbounded, as
        ms, count or usd): intervals of its mean lie inside, those of a difference inside ±(high - low)."""
        if self.scale in SCALE_BOUNDS:
            return SCALE_BOUNDS[self.scale]
        found = _RANGE.fullmatch(self.scale.strip())
        return (float(found.group(1)), float(found.group(2))) if found else (None, None)

    @property
    def builtin(self) -> bool:
        return self.origin == "builtin"

    @property
    def input_names(self) -> tuple[str, ...]:
        """Its inputs as the docs table and the `metric_registry` view show them (a judge step as judge:<name>)."""
        return (*self.inputs, *(f"judge:{s.name}" for s in self.steps))

    def as_row(self) -> dict[str, Any]:
        return {
            "metric": self.name,
            "family": self.family,
            "version": self.version,
            "scale": self.scale,
            "higher_is_better": self.higher_is_better,
            "level": self.level,
            "seed": self.seed,
            "applies_to": self.applies_to,
            "inputs": ",".join(self.input_names),
            "description": self.description,
            "scale_view": self.scale_view,
            "origin": self.origin,
            "source": self.source,
            "same_as": self.same_as,
            "scale_min": self.bounds[0],
            "scale_max": self.bounds[1],
        }


_REGISTRY: dict[str, Metric] = {}


def register(
    name: str,
    *,
    family: str,
    scale: str,
    higher_is_better: bool | None,
    seed: str,
    version: str = "1",
    level: str = "case",
    applies_to: str = "all",
    inputs: tuple[str, ...] = (),
    steps: tuple[JudgeStep, ...] = (),
    headline: bool = False,
    worst_cases: bool = False,
    texts: tuple[str, ...] = (),
    scale_view: str | None = None,
    yardsticks: tuple[str, ...] = (),
    same_as: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register `fn` under `name`; the first docstring line becomes the description."""
    if family not in FAMILIES or level not in LEVELS or applies_to not in APPLIES_TO:
        raise ValueError(f"bad metadata for metric {name!r}: {family=}, {level=}, {applies_to=}")
    for kind in texts:
        if kind not in TEXT_KINDS:
            raise UnknownNameError(f"kind of text (texts=) of metric {name!r}", kind, TEXT_KINDS)
    if texts and "vectors" not in inputs:
        raise ValueError(f"metric {name!r} declares texts={texts} but does not read 'vectors' (inputs=)")
    for kind in yardsticks:
        if kind not in YARDSTICKS:
            raise UnknownNameError(f"yardstick of metric {name!r}", kind, YARDSTICKS)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY:
            raise ValueError(f"metric {name!r} registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[name] = Metric(
            name,
            family,
            version,
            scale,
            higher_is_better,
            level,
            seed,
            doc[0] if doc else "",
            fn,
            applies_to,
            inputs,
            tuple(steps),
            headline,
            worst_cases,
            tuple(texts),
            scale_view=scale_view,
            yardsticks=tuple(yardsticks),
            same_as=same_as,
        )
        return fn

    return wrap


def columnar_form(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: `fn` is the vectorised form of the registered metric `name` (the same values, status,
    reason and label source for every case as the metric's function; tests/test_columnar_scoring.py)."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        metric = get_metric(name)
        if metric.columnar is not None:
            raise ValueError(f"metric {name!r} has two columnar forms")
        _REGISTRY[name] = replace(metric, columnar=fn)
        return fn

    return wrap


def add_metric(metric: Metric) -> Metric:
    """Register a user's metric object (a plugin's, an entry point's, a rubric's or an assertion's). It may
    not take a built-in metric's name; registered again (a notebook cell run twice, an edited plugin
    loaded again, the same eval file in a second run) it replaces the earlier definition."""
    if metric.builtin:
        raise ValueError(f"metric {metric.name!r}: add_metric registers a user's metric, not a built-in one")
    if metric.family not in FAMILIES or metric.level not in LEVELS or metric.applies_to not in APPLIES_TO:
        raise ValueError(f"bad metadata for metric {metric.name!r}: {metric.family=}, {metric.level=}")
    if metric.origin not in ORIGINS:
        raise UnknownNameError(f"origin of metric {metric.name!r}", metric.origin, ORIGINS)
    earlier = _REGISTRY.get(metric.name)
    if earlier is not None and earlier.builtin:
        raise ConfigError(
            f"metric {metric.name!r} ({metric.source or metric.origin}) has the name of a built-in metric; "
            f"a user's metric may not shadow one: rename it"
        )
    # another eval file's metric of that name (registered earlier in this process) is replaced: two definitions
    # within one eval file are refused before anything registers (raglake.metrics.extensions)
    _REGISTRY[metric.name] = metric
    _OWNER.pop(metric.name, None)  # whose it is, the eval file that registered it says (claim) after this
    return metric


_OWNER: dict[str, str] = {}  # a user's metric registered by an eval file -> that eval file


def claim(names: Collection[str], eval_file: str) -> None:
    """These metrics are the eval file's own: another run (another eval file) may not compute them by name. A
    metric registered outside any eval file (a notebook's @raglake.metric, --plugin) belongs to no file."""
    _OWNER.update(dict.fromkeys(names, eval_file))


def remove_metric(name: str) -> None:
    """Unregister a user's metric (a plugin loaded again no longer defines it, or failed halfway); a
    built-in metric cannot be removed."""
    metric = _REGISTRY.get(name)
    if metric is not None and metric.builtin:
        raise ValueError(f"metric {name!r} is a built-in metric; only a user's metric can be removed")
    _REGISTRY.pop(name, None)
    _OWNER.pop(name, None)


def all_metrics(level: str | None = None, family: str | None = None) -> list[Metric]:
    """The registered metrics (raglake.metrics imports every built-in metric module, which registers them)."""
    chosen = [
        m for m in _REGISTRY.values() if (level is None or m.level == level) and (family is None or m.family == family)
    ]
    # by family, then in the order each module registers them (import order must not matter)
    return sorted(chosen, key=lambda m: FAMILIES.index(m.family))


def repeated(names: Collection[str]) -> set[str]:
    """The metrics among `names` that give the same figure as another one among them (`same_as`): shown
    once by default, as that other one."""
    return {n for n in names if (m := _REGISTRY.get(n)) is not None and m.same_as in names}


_MAKERS: list[Callable[[str], Metric | None]] = []  # make a metric named on first use (raglake.metrics.variants)


def add_maker(maker: Callable[[str], Metric | None]) -> None:
    """`maker(name)` makes and registers the metric `name` when no registered one has that name (or says None)."""
    _MAKERS.append(maker)


def get_metric(name: str) -> Metric:
    found = _REGISTRY.get(name)
    for maker in _MAKERS if found is None else ():
        found = maker(name)
        if found is not None:
            break
    if found is None:
        raise UnknownNameError("metric", name, _REGISTRY)
    return found


def default_metrics(level: str = "case", extra: Collection[str] = ()) -> list[Metric]:
    """What a run computes when it names no metrics: every built-in metric of the level, every metric of an
    installed package's entry point, and `extra` (the user's metrics, rubrics and assertions of the run's
    own eval file; another eval file's, registered earlier in this process, are not this run's)."""
    return [m for m in all_metrics(level=level) if m.origin in ("builtin", "entry_point") or m.name in extra]


def select_metrics(names: list[str] | None, level: str = "case", extra: Collection[str] = ()) -> list[Metric]:
    """The named metrics (validated, with 'did you mean'), or the level's default_metrics (with `extra`)."""
    if not names:
        return default_metrics(level, extra)
    chosen = [get_metric(n) for n in names]
    foreign = next((m for m in chosen if m.name in _OWNER and m.name not in extra), None)
    if foreign is not None:
        raise ConfigError(
            f"metric {foreign.name!r} belongs to the eval file {_OWNER[foreign.name]}, not to this run's: define it "
            f"in the eval file you run (or name its plugin there)"
        )
    wrong = [m.name for m in chosen if m.level != level]
    if wrong:
        raise UnknownNameError(f"{level}-level metric", wrong[0], [m.name for m in all_metrics(level)])
    return chosen


def metric_versions(metrics: list[Metric]) -> dict[str, str]:
    return {m.name: m.version for m in metrics}
