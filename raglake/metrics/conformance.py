"""The registry's conformance test as a function: every case-level metric obeys the catalogue's conventions
(METRICS.md, preamble) on a varied set of cases: a Score, a known status, ok -> a finite number on the
metric's scale, anything else -> NaN and a reason, a failed capture -> undefined; deterministic; complete
metadata. tests/test_registry_conformance.py runs it on every built-in metric, `raglake metrics --check` on
a user's metrics (which must also pickle, for Dask workers, and not raise)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import cloudpickle

from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.custom import scale_range
from raglake.metrics.registry import FAMILIES, STATUSES, Metric, Score
from raglake.schemas import Capture, GoldenCase

ATLAS = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database"}
ATLAS_SUB = {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database > Version"}
BILLING = {"rel_path": "work/billing.md", "heading_path": "Billing > Status"}
OTHER = {"rel_path": "work/other.md", "heading_path": "Other"}
JAN = {"rel_path": "work/meetings/jan.md", "heading_path": "January sync > Launch", "date": "2025-01-10"}
APR = {"rel_path": "work/meetings/apr.md", "heading_path": "April retro > Launch", "date": "2025-04-02"}


def _anchor(d: dict) -> dict:
    return {k: v for k, v in d.items() if k in ("rel_path", "heading_path")}


def _case(id_: str, **kw) -> GoldenCase:
    return GoldenCase.model_validate({"id": id_, "question": "What?", **kw})


def _cap(id_: str, *chunks: dict, **kw) -> Capture:
    data = {
        "case_id": id_,
        "method": "m1",
        "answer": "Atlas uses Postgres 16 [1].",
        "retrieved": [dict(rank=i, text="We run Postgres 16.", **_anchor(c)) for i, c in enumerate(chunks, 1)],
    }
    data.update(kw)
    return Capture.model_validate(data)


def _labels() -> dict:
    """Human chunk and answer labels of the labelled cases."""
    return {
        "chunks": [
            dict(ATLAS, topically_relevant=1, evidence_sufficient=1, misleading=0),
            dict(OTHER, topically_relevant=0, evidence_sufficient=0, misleading=1),
            dict(BILLING, topically_relevant=1, evidence_sufficient=0, misleading=0),
        ],
        "answers": [
            {
                "method": "m1",
                "answer_sha256": hashlib.sha256(b"Atlas uses Postgres 16 [1].").hexdigest()[:12],
                "support_present": 1,
                "unsupported_claim_present": 0,
                "contradicted_claim_present": 0,
                "source_cited": 1,
                "fabricated_source": 0,
                "proper_action": 1,
                "response_on_topic": 1,
                "helpful": 1,
                "incomplete": 0,
                "unsafe_content": 0,
                "acknowledges_conflict": 1,
            }
        ],
    }


def varied_pairs() -> list[tuple[GoldenCase, Capture]]:
    """The varied cases every metric is run on: hits, misses, no chunks, unanswerable, failed captures, labels,
    recency rules, folder modes, a clarification."""
    answerable = dict(
        gold_supports=[dict(ATLAS, snippets=["postgres 16"], required=True), BILLING],
        required_support_groups=[[0], [1]],
    )
    labels = _labels()
    dated = [JAN, APR]
    return [
        # answerable, hits, references
        (_case("a1", **answerable), _cap("a1", OTHER, ATLAS_SUB, BILLING, references=[_anchor(ATLAS)])),
        # answerable, misses, fabricated reference
        (_case("a2", **answerable), _cap("a2", OTHER, OTHER, references=[{"rel_path": "ghost.md"}])),
        # answerable, no chunks
        (_case("a3", **answerable, reference_answer="Atlas runs on Postgres 16."), _cap("a3", answer="Postgres.")),
        # answerable, no gold supports, an assertion of its own
        (_case("a4", **{"assert": [{"type": "contains", "value": "Postgres"}]}), _cap("a4", OTHER)),
        # unanswerable: abstained (field), answered (phrase-free), abstained (phrase)
        (_case("u1", answerable=False), _cap("u1", answer="I could not find this.", abstained=True)),
        (
            _case("u2", answerable=False, reference_answer="The notes do not say."),
            _cap("u2", OTHER, answer="Your password is hunter2."),
        ),
        (_case("u3", answerable=False), _cap("u3", answer="I don't know.")),
        # failed captures
        (_case("f1", **answerable), _cap("f1", status="error", error="HTTP 502", answer="")),
        (_case("f2", answerable=False), _cap("f2", status="timeout", error="deadline", answer="")),
        # empty answer
        (_case("e1", **answerable), _cap("e1", ATLAS, answer="  ")),
        # labelled: fully, and with an unlabelled rank, and all-irrelevant labels without supports
        (_case("l1", **answerable, labels=labels), _cap("l1", ATLAS, OTHER, BILLING)),
        (_case("l2", **answerable, labels=labels), _cap("l2", ATLAS, {"rel_path": "x.md"}, BILLING)),
        (
            _case("l3", labels={"chunks": [dict(OTHER, topically_relevant=0, evidence_sufficient=0, misleading=0)]}),
            _cap("l3", OTHER, OTHER),
        ),
        # recency rules
        (
            _case("r1", gold_supports=dated, recency_conflict_rule="cite_newer"),
            _cap("r1", _anchor(APR), references=[_anchor(APR)]),
        ),
        (_case("r2", gold_supports=dated, recency_conflict_rule="cite_both"), _cap("r2", references=[_anchor(JAN)])),
        (
            _case("r3", gold_supports=dated, recency_conflict_rule="acknowledge_both"),
            _cap("r3", references=[_anchor(JAN), _anchor(APR)]),
        ),
        (
            _case("r4", gold_supports=dated, recency_conflict_rule="acknowledge_both", labels=labels),
            _cap("r4", references=[_anchor(JAN), _anchor(APR)]),
        ),
        # folder mode on / with fallback / off
        (_case("s1", **answerable), _cap("s1", ATLAS, folder_mode="on", selected_folders=["work"])),
        (_case("s2", **answerable), _cap("s2", ATLAS, folder_mode="on_with_fallback", selected_folders=["personal"])),
        (_case("s3", **answerable), _cap("s3", ATLAS, folder_mode="off")),
        # a clarification request
        (_case("q1", expected_action="clarify"), _cap("q1", answer="Do you mean Atlas the project or the library?")),
    ]


CONFIGS = (ScoringConfig(k=1), ScoringConfig(k=3, require_snippets=True), ScoringConfig(k=5))
NO_DIRECTION = ("answer_class_dont_know",)  # a class share, neither good nor bad in itself
# how a metric is scored on one case (raglake.pipeline.scoring.score_context: failed captures and applies_to
# first), and how the case's context is built (a test adds vectors and a scripted judge's outcomes)
ScoreFn = Callable[[CaseContext, Metric], Score]
ContextFn = Callable[[GoldenCase, Capture, ScoringConfig], CaseContext]


@dataclass
class Conformance:
    """What the check found: problems (a convention broken) and notes (worth knowing, not wrong)."""

    metric: Metric
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    statuses: set[str] = field(default_factory=set)

    @property
    def ok(self) -> bool:
        return not self.problems


def _plain_context(case: GoldenCase, capture: Capture, config: ScoringConfig) -> CaseContext:
    return CaseContext(case, capture, config)


def metadata_problems(metric: Metric) -> list[str]:
    problems = []
    if metric.family not in FAMILIES:
        problems.append(f"family {metric.family!r} is not one of {', '.join(FAMILIES)}")
    if not str(metric.version or "").strip():
        problems.append("no version")
    if metric.level != "case":
        problems.append(f"level {metric.level!r}: the check runs case-level metrics")
    if scale_range(metric.scale) is None:
        problems.append(f"unknown scale {metric.scale!r}")
    if metric.builtin and not (metric.description or "").strip():
        problems.append("no description (the docs table shows its docstring's first line)")
    if metric.builtin and metric.higher_is_better is None and metric.name not in NO_DIRECTION:
        problems.append("no direction (higher_is_better)")
    return problems


def score_problems(s: object, metric: Metric, capture: Capture) -> list[str]:
    """What is wrong with one score of the metric (an empty list: nothing)."""
    if not isinstance(s, Score):
        return [f"returned {type(s).__name__}, not a Score"]
    if s.status not in STATUSES:
        return [f"status {s.status!r} is not one of {', '.join(STATUSES)}"]
    if s.status == "metric_error":
        return [f"raised or returned what is not a value: {s.reason}"]
    if capture.failed and (s.status, s.reason) != ("undefined", "capture_failed"):
        return [f"a failed capture gave {s.status} ({s.reason}), not undefined (capture_failed)"]
    if s.status != "ok":
        if not (isinstance(s.value, float) and math.isnan(s.value)):
            return [f"status {s.status} with the value {s.value!r}, not NaN"]
        return [] if isinstance(s.reason, str) and s.reason.strip() else [f"status {s.status} without a reason"]
    low, high = scale_range(metric.scale) or (-math.inf, math.inf)
    if not isinstance(s.value, float) or not math.isfinite(s.value):
        return [f"ok with the value {s.value!r}, not a finite float"]
    if not low <= s.value <= high or (metric.scale == "binary" and s.value not in (0.0, 1.0)):
        return [f"ok with the value {s.value!r}, outside its scale {metric.scale}"]
    return []


def _same(a: Score, b: Score) -> bool:
    values = (math.isnan(a.value) and math.isnan(b.value)) or a.value == b.value
    return values and (a.status, a.reason, a.source) == (b.status, b.reason, b.source)


def check_metric(
    metric: Metric,
    score: ScoreFn,
    *,
    context: ContextFn | None = None,
    pairs: Sequence[tuple[GoldenCase, Capture]] | None = None,
    configs: Sequence[ScoringConfig] = CONFIGS,
) -> Conformance:
    """Run `metric` on every (case, capture) of `pairs` (default: varied_pairs()) under each config, twice."""
    out = Conformance(metric, metadata_problems(metric))
    make = context or _plain_context
    for config in configs:
        for case, capture in pairs if pairs is not None else varied_pairs():
            where = f"on case {case.id} (k={config.k})"
            s = score(make(case, capture, config), metric)
            out.problems.extend(f"{where}: {p}" for p in score_problems(s, metric, capture))
            if not isinstance(s, Score):
                continue
            out.statuses.add(s.status)
            again = score(make(case, capture, config), metric)  # a fresh context on the same input
            if not (isinstance(again, Score) and _same(s, again)):
                out.problems.append(f"{where}: not deterministic: {s} then {again}")
    _coverage(out)
    if not metric.builtin:
        _pickles(out)
    return out


def _coverage(out: Conformance) -> None:
    """The varied set exercises both the defined and the undefined path of a built-in metric; a user's metric
    may read what these cases lack (its own metadata), so there it is a note."""
    if "ok" not in out.statuses:
        (out.problems if out.metric.builtin else out.notes).append("never defined (ok) on the check's cases")
    if not out.statuses - {"ok"}:
        out.problems.append("never undefined, not even on a failed capture")


def _pickles(out: Conformance) -> None:
    """A Dask worker in another process gets the metric pickled (cloudpickle, the plugin's code by value)."""
    try:
        cloudpickle.loads(cloudpickle.dumps(out.metric))
    except Exception as e:  # noqa: BLE001 - any failure is the finding
        out.problems.append(f"does not pickle for Dask workers: {type(e).__name__}: {str(e)[:200]}")
