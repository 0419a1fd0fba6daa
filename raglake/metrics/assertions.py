"""Assertions (promptfoo-style, deterministic, no judge) as 0/1 metrics with a reason.

- An eval file's `assertions: {name: spec}` becomes one metric per name (family and origin `assertion`, scale
  binary, higher is better, version = the spec's content hash), applied to every question.
- A golden case's own `assert:` list is scored by one built-in metric, `question_assertions`: 1 when every
  assertion of the question passes, 0 when one fails (the reason names each that failed), undefined when the
  question has none, or when none fails but one cannot be decided.

An assertion is 1 (pass) or 0 (fail) with a reason that says what it found, or undefined when it cannot apply
(no latency, no cost, no retrieved chunk to cite); a failed capture is undefined before any of this runs.
The spec models are raglake.assertion_specs (a golden case holds them)."""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow.compute as pc

from raglake.assertion_specs import AssertionSpec, CostBelowSpec, LatencyBelowSpec
from raglake.columnar.golden import GoldenColumns
from raglake.columnar.normalise import mask
from raglake.errors import ConfigError
from raglake.metrics.assertion_checks import ON_ANSWER, check_answer, cost_score, evaluate, latency_score
from raglake.metrics.columnar import BatchContext, Column
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import STATUSES, Metric, Score, add_metric, columnar_form, register

# bump when the evaluation of a type changes a value: it is part of every assertion's version
EVALUATION_VERSION = "1"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_INPUTS = {
    "cites": ("answer", "references", "retrieved"),
    "latency-below": ("latency_ms",),
    "cost-below": ("cost_usd",),
}


def spec_version(spec: AssertionSpec) -> str:
    """`<evaluation version>+<sha256 of the spec's canonical JSON, 8 digits>`: a changed spec is a new version."""
    return f"{EVALUATION_VERSION}+{hashlib.sha256(spec.canonical_json().encode()).hexdigest()[:8]}"


def describe(spec: AssertionSpec) -> str:
    """One line saying what the spec checks (the metric's description)."""
    fields = {k: v for k, v in spec.model_dump(mode="json", exclude={"type"}).items() if v is not None}
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:80]}" for k, v in fields.items())
    return f"Assertion {spec.type}({shown}): 1 when it holds, 0 when not."


def _score_spec(spec: AssertionSpec, ctx: CaseContext) -> Score:
    return evaluate(spec, ctx.capture)


# ---- over a whole batch (Metric.columnar): the Scores the functions above give, without a model per case ----


def _column_of(scores: list[Score], which: np.ndarray, n: int) -> Column:
    """A column whose row i holds scores[which[i]]."""
    col = Column(n)
    col.value[:] = np.array([s.value for s in scores], dtype=np.float64)[which]
    col.status[:] = np.array([STATUSES.index(s.status) for s in scores], dtype=np.int8)[which]
    col.reason[:] = np.array([col.code(s.reason) for s in scores], dtype=np.int32)[which]
    return col


def _answer_column(spec: AssertionSpec, bc: BatchContext) -> Column:
    """An assertion of the answer alone, evaluated once per distinct answer of the batch."""
    answers = pc.fill_null(bc.capture_column("answer"), "")
    distinct = pc.unique(answers)
    which = np.asarray(pc.index_in(answers, value_set=distinct), dtype=np.int64)
    return _column_of([check_answer(spec, a) for a in distinct.to_pylist()], which, bc.n)


def _latency_column(spec: LatencyBelowSpec, bc: BatchContext) -> Column:
    """latency-below from the batch's latency columns, once per distinct (stage, ms)."""

    def stage_ms(stage: str) -> list[float | None]:
        return bc.capture_column(f"latency_{stage}").to_pylist()  # null where the capture has none

    if spec.stage is not None:
        keys = [(spec.stage, ms) for ms in stage_ms(spec.stage)]
    else:  # the target's total where it reports one, else wall (assertion_checks.latency)
        keys = [("total", t) if t is not None else ("wall", w) for t, w in zip(stage_ms("total"), stage_ms("wall"))]
    seen: dict[tuple[str, float | None], int] = {}
    which = np.fromiter((seen.setdefault(k, len(seen)) for k in keys), dtype=np.int64, count=len(keys))
    return _column_of([latency_score(spec, *k) for k in seen], which, bc.n)


def _cost_column(spec: CostBelowSpec, bc: BatchContext) -> Column:
    """cost-below from the batch's cost column, once per distinct cost (null where the capture has none)."""
    costs = bc.capture_column("cost_usd")
    distinct = pc.unique(costs)
    which = np.asarray(pc.index_in(costs, value_set=distinct, skip_nulls=False), dtype=np.int64)
    return _column_of([cost_score(spec, c) for c in distinct.to_pylist()], which, bc.n)


def _columnar(spec: AssertionSpec) -> Any:
    if spec.type in ON_ANSWER:
        return functools.partial(_answer_column, spec)
    if spec.type == "latency-below":
        return functools.partial(_latency_column, spec)
    if spec.type == "cost-below":
        return functools.partial(_cost_column, spec)
    return None  # cites reads each case's chunks and references: per case


def assertion_metric(name: str, spec: AssertionSpec, source: str | None = None) -> Metric:
    """The metric of an eval file's assertion `name` (not registered)."""
    return Metric(
        name=name,
        family="assertion",
        version=spec_version(spec),
        scale="binary",
        higher_is_better=True,
        level="case",
        seed="-",
        description=describe(spec),
        fn=functools.partial(_score_spec, spec),  # pickles by reference to this module, with the spec by value
        inputs=_INPUTS.get(spec.type, ("answer",)),
        origin="assertion",
        source=f"{source}: assertions.{name}" if source else f"assertions.{name}",
        columnar=_columnar(spec),
    )


def register_assertions(specs: Mapping[str, AssertionSpec], source: str | None = None) -> list[str]:
    """Register a metric per assertion of an eval file (again: the same definitions replace themselves);
    their names. A name must be a metric name (lowercase snake_case) and not a built-in metric's."""
    for name in specs:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            where = f"{source}: " if source else ""
            raise ConfigError(
                f"{where}assertions: {name!r} is not a metric name (lowercase letters, digits and _, "
                "starting with a letter)"
            )
    return [add_metric(assertion_metric(name, spec, source)).name for name, spec in specs.items()]


@register(
    "question_assertions",
    family="assertion",
    scale="binary",
    higher_is_better=True,
    seed="-",
    inputs=("assert", "answer", "references", "retrieved", "latency_ms"),
    headline=True,  # shown and charted where a run has values (a golden set with `assert:` lists)
    worst_cases=True,  # the report lists the questions whose own assertions failed, with the reasons
)
def question_assertions(ctx: CaseContext) -> Score:
    """1 when every assertion of the question's own `assert:` list passes, 0 when one fails (undefined without any)."""
    specs = ctx.case.assertions
    if not specs:
        return Score.undefined("no assertions on this question")
    results = [(i, evaluate(spec, ctx.capture)) for i, spec in enumerate(specs)]
    failed = [f"assert[{i}] {s.reason}" for i, s in results if s.status == "ok" and s.value == 0.0]
    if failed:
        return Score.ok(0.0, reason=f"{len(failed)} of {len(specs)} failed: " + "; ".join(failed))
    errors = [f"assert[{i}] {s.reason}" for i, s in results if s.status == "metric_error"]
    if errors:
        return Score(math.nan, "metric_error", "; ".join(errors))
    open_ = [f"assert[{i}] {s.reason}" for i, s in results if s.status != "ok"]
    if open_:
        return Score.undefined(f"{len(open_)} of {len(specs)} undecided, none failed: " + "; ".join(open_))
    return Score.ok(1.0, reason=f"all {len(specs)} passed")


@columnar_form("question_assertions")
def _question_assertions_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    own = asserted(bc.golden)
    col.undefined(~own, "no assertions on this question")
    col.defer(own)
    return col


def asserted(golden: GoldenColumns) -> np.ndarray:
    """Rows whose case may have assertions of its own (the metric's function decides those): a canonical
    dump holds the key `"assert":` only then (a case's metadata may hold the same text: looked at again)."""
    if golden.models is not None:
        return np.array([bool(m.assertions) for m in golden.models], dtype=bool)
    if b'"assert":' not in golden.lines.data:
        return np.zeros(len(golden), dtype=bool)
    return mask(pc.match_substring(golden.lines.strings(), '"assert":'))
