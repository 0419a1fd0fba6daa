"""What a user's Python metric (`@raglake.metric`, raglake.metrics.plugins) sees and how its return becomes a
Score: the read-only `Case` built from a CaseContext, the inputs a metric may declare (a missing one makes
the case `undefined` before the function runs), the scales it may declare, and the conversion of what it
returns (a number, a bool, None, `(value, reason)` or a Score). An exception on one case is that case's
`metric_error`, never the run's."""

from __future__ import annotations

import math
import numbers
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from raglake.anchors import heading_string
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import STATUSES, Score

# what a metric may declare it reads (inputs=): a case that lacks one is `undefined` with this reason,
# and the function is not called
INPUTS: dict[str, str] = {
    "question": "no question",
    "answer": "no answer",
    "contexts": "no contexts",
    "reference": "no reference answer",
    "metadata": "no metadata",
    "latency": "no latency",
    "cost": "no cost",
}
# scales with a unit: any finite value from 0 up
UNIT_SCALES = ("count", "ms", "seconds", "tokens", "usd", "chars", "words")
SCALES_HELP = (
    "'0-1', 'binary', 'cosine', a range such as '1-5', 'number' (any value) or a unit (" + ", ".join(UNIT_SCALES) + ")"
)
_RANGE = re.compile(r"(-?\d+(?:\.\d+)?)-(-?\d+(?:\.\d+)?)")
MAX_REASON = 300


def scale_range(scale: str) -> tuple[float, float] | None:
    """The values a scale allows, (low, high); None for a scale that is not known."""
    if scale == "binary":
        return 0.0, 1.0
    if scale == "cosine":
        return -1.0, 1.0
    if scale == "number":
        return -math.inf, math.inf
    if scale in UNIT_SCALES:
        return 0.0, math.inf
    m = _RANGE.fullmatch(scale)
    if m and float(m.group(1)) < float(m.group(2)):
        return float(m.group(1)), float(m.group(2))
    return None


@dataclass(frozen=True)
class Chunk:
    """One retrieved chunk of the top K, as a metric sees it."""

    rank: int
    text: str
    rel_path: str
    heading: str
    score: float | None
    chunk_id: str | None


def _frozen(value: Any) -> Any:
    """A read-only copy of free-form metadata: mappings as MappingProxyType, lists as tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


class Case:
    """One golden case and what the target gave for it, read-only: `id`, `question`, `answer` (None when
    the target gave none), `contexts` (the texts of the top K retrieved chunks, in rank order), `retrieved`
    (those chunks with rank, path, heading and score), `references` (the anchors the answer cites),
    `reference` (the reference answer or None), `metadata`, `category`, `difficulty`, `tags`,
    `answerable`, `expected_action`, `abstained`, `latency_ms` (the target's total, else the wall time
    around the call), `latency` (per stage), `cost_usd`, `method`, `status` and `k`."""

    def __init__(self, ctx: CaseContext):
        object.__setattr__(self, "_ctx", ctx)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a case is read-only (setting {name!r})")

    def __repr__(self) -> str:
        return f"Case(id={self.id!r}, question={self.question[:60]!r}, answer={(self.answer or '')[:60]!r})"

    @property
    def id(self) -> str:
        return self._ctx.case.id

    @property
    def question(self) -> str:
        return self._ctx.case.question

    @property
    def answer(self) -> str | None:
        answer = self._ctx.capture.answer
        return answer if answer.strip() else None

    @cached_property
    def contexts(self) -> tuple[str, ...]:
        return tuple(c.text for c in self._ctx.top)

    @cached_property
    def retrieved(self) -> tuple[Chunk, ...]:
        return tuple(
            Chunk(c.rank, c.text, c.rel_path, heading_string(c.heading_path), c.score, c.chunk_id)
            for c in self._ctx.top
        )

    @cached_property
    def references(self) -> tuple[str, ...]:
        """The answer's references as 'path > heading'."""
        return tuple(" > ".join((r.rel_path, *r.heading_path)) for r in self._ctx.capture.references)

    @property
    def reference(self) -> str | None:
        reference = self._ctx.case.reference_answer
        return reference if reference and reference.strip() else None

    @cached_property
    def metadata(self) -> Mapping[str, Any]:
        return _frozen(self._ctx.case.metadata)

    @property
    def category(self) -> str | None:
        return self._ctx.case.category

    @property
    def difficulty(self) -> str | None:
        return self._ctx.case.difficulty

    @cached_property
    def tags(self) -> tuple[str, ...]:
        return tuple(self._ctx.case.tags)

    @property
    def answerable(self) -> bool:
        return self._ctx.case.answerable

    @property
    def expected_action(self) -> str | None:
        return self._ctx.case.expected_action

    @property
    def abstained(self) -> bool:
        """The target said it abstained, or the answer reads as "I don't know" (seed 004's phrases)."""
        return self._ctx.abstained

    @property
    def latency_ms(self) -> float | None:
        latency = self._ctx.capture.latency_ms
        return latency.total if latency.total is not None else latency.wall

    @cached_property
    def latency(self) -> Mapping[str, float]:
        """Per stage (folder_selection, retrieval, generation, total, wall): the ones the capture has."""
        stages = self._ctx.capture.latency_ms.model_dump()
        return MappingProxyType({k: v for k, v in stages.items() if v is not None})

    @property
    def cost_usd(self) -> float | None:
        """What the target said the call cost, in US dollars (None: it said nothing)."""
        return self._ctx.capture.cost_usd

    @property
    def method(self) -> str | None:
        return self._ctx.capture.method

    @property
    def status(self) -> str:
        return self._ctx.capture.status

    @property
    def k(self) -> int:
        return self._ctx.k


_PRESENT: dict[str, Callable[[Case], bool]] = {
    "question": lambda c: bool(c.question.strip()),
    "answer": lambda c: c.answer is not None,
    "contexts": lambda c: bool(c.contexts),
    "reference": lambda c: c.reference is not None,
    "metadata": lambda c: bool(c.metadata),
    "latency": lambda c: c.latency_ms is not None,
    "cost": lambda c: c.cost_usd is not None,
}


def metric_error(reason: str) -> Score:
    return Score(math.nan, "metric_error", reason[:MAX_REASON])


def raised(e: BaseException) -> Score:
    """The row of a case on which the metric raised: "<ExcType>: <message> (at file:line)"."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    message = str(e)
    text = f"{type(e).__name__}: {message[:MAX_REASON]}" if message else type(e).__name__
    return Score(math.nan, "metric_error", text + where)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(value: Any) -> float | None:
    if isinstance(value, (bool, np.bool_)):
        return float(bool(value))
    if isinstance(value, numbers.Real):
        return float(value)
    return None


@dataclass(frozen=True)
class UserFunction:
    """The `Metric.fn` of a user's metric: builds the case, checks the declared inputs, calls the user's
    function and converts what it returns. A module-level class: it pickles by reference, and the user's
    function inside it by value (raglake.metrics.plugins registers the plugin module for that)."""

    fn: Callable[[Case], Any]
    inputs: tuple[str, ...]
    scale: str

    def __call__(self, ctx: CaseContext) -> Score:
        case = Case(ctx)
        for name in self.inputs:
            if not _PRESENT[name](case):
                return Score.undefined(INPUTS[name])
        try:
            out = self.fn(case)
        except Exception as e:  # noqa: BLE001 - a user's metric failing on one case is that case's row, not the run's
            return raised(e)
        return self.convert(out)

    def convert(self, out: Any) -> Score:
        """A Score from what the function returned."""
        if isinstance(out, Score):
            return self._checked(out)
        reason = None
        if isinstance(out, tuple):
            if len(out) != 2 or not (out[1] is None or isinstance(out[1], str)):
                return metric_error(f"returned the tuple {_short(out)}; a tuple is (value, reason), reason a string")
            out, reason = out
        if out is None:
            return Score.undefined(reason or "the metric returned None")
        value = _number(out)
        if value is None:
            return metric_error(
                f"returned {type(out).__name__} {_short(out)}; a metric returns a number, a bool, None (undefined), "
                "(value, reason) or a Score"
            )
        return self._in_scale(value) or Score.ok(value, reason=reason)

    def _in_scale(self, value: float) -> Score | None:
        if not math.isfinite(value):
            return metric_error(f"returned {value}; a metric returns a finite number (None: undefined)")
        low, high = scale_range(self.scale) or (-math.inf, math.inf)
        if not low <= value <= high or (self.scale == "binary" and value not in (0.0, 1.0)):
            return metric_error(f"returned {value:g}, outside its scale {self.scale}")
        return None

    def _checked(self, score: Score) -> Score:
        if score.status not in STATUSES:
            return metric_error(f"returned a Score of status {score.status!r}; known: {', '.join(STATUSES)}")
        if score.status != "ok":
            if isinstance(score.value, float) and math.isnan(score.value) and score.reason:
                return score
            return replace(score, value=math.nan, reason=score.reason or score.status)
        value = _number(score.value)
        if value is None:
            return metric_error(f"returned an ok Score of value {_short(score.value)}; its value is a number")
        return self._in_scale(value) or replace(score, value=value)
