"""Evaluating one assertion (raglake.assertion_specs) on one capture: 1 (pass) or 0 (fail) with a reason that
says what it found, undefined when it cannot apply (no latency, no cost, no retrieved chunk to cite), a
`metric_error` row should evaluating it raise. Pure functions of the answer (or of the capture); the metrics
built on them are raglake.metrics.assertions."""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from typing import Any

from raglake.assertion_specs import (
    AssertionSpec,
    CitesSpec,
    ContainsSpec,
    CostBelowSpec,
    EqualsSpec,
    IsJsonSpec,
    LatencyBelowSpec,
    MaxLengthSpec,
    NotContainsSpec,
    NotRegexSpec,
    RegexSpec,
    compiled,
)
from raglake.metrics import rules
from raglake.metrics.registry import Score
from raglake.schemas import Capture

_MAX_QUOTE = 60
# a numbered citation marker, as raglake's `source_cited` rule reads one (rules.py): [1], [2, 3], [Source 4],
# [source: 5], [doc 6], [ref 7]
_MARKER = re.compile(r"\[(?:source|src|doc|ref)?\s*:?\s*(\d{1,9}(?:\s*,\s*\d{1,9})*)\]", re.IGNORECASE)


def _q(text: str) -> str:
    """A string quoted for a reason, cut at _MAX_QUOTE characters."""
    text = text.replace("\n", " ")
    return f"'{text if len(text) <= _MAX_QUOTE else text[: _MAX_QUOTE - 1] + '…'}'"


def _num(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _pass(passed: bool, reason: str) -> Score:
    return Score.ok(1.0 if passed else 0.0, reason=reason)


def _contains(spec: ContainsSpec | NotContainsSpec, answer: str) -> Score:
    label = spec.type if spec.case_sensitive else spec.type.replace("contains", "icontains")
    values = [spec.value] if isinstance(spec.value, str) else list(spec.value)
    hay = answer if spec.case_sensitive else answer.casefold()
    found = [v for v in values if (v if spec.case_sensitive else v.casefold()) in hay]
    missing = [v for v in values if v not in found]
    holds = bool(found) if spec.match == "any" else not missing  # does the answer contain them, per `match`
    passed = holds if spec.type == "contains" else not holds
    if isinstance(spec.value, str):
        return _pass(passed, f"{label} {_q(spec.value)}: {'found' if found else 'not found'}")
    listed = "[" + ", ".join(_q(v) for v in values) + "]"
    if not found or not missing:
        said = "all found" if found else "none found"
    elif spec.match == "any":
        said = ", ".join(map(_q, found)) + " found"
    else:
        said = ", ".join(map(_q, missing)) + " not found"
    return _pass(passed, f"{label} {spec.match} of {listed}: {said}")


def _regex(spec: RegexSpec | NotRegexSpec, answer: str) -> Score:
    label = spec.type if spec.case_sensitive else f"{spec.type} (ignoring case)"
    m = compiled(spec.pattern, spec.case_sensitive).search(answer)
    passed = (m is not None) == (spec.type == "regex")
    return _pass(passed, f"{label} {_q(spec.pattern)} " + (f"found: {_q(m.group(0))}" if m else "not found"))


def _equals(spec: EqualsSpec, answer: str) -> Score:
    def norm(text: str) -> str:
        text = " ".join(text.split()) if spec.normalise_whitespace else text
        return text if spec.case_sensitive else text.casefold()

    if norm(answer) == norm(spec.value):
        return _pass(True, f"equals {_q(spec.value)}")
    return _pass(False, f"equals {_q(spec.value)}: the answer is {_q(answer)}")


@functools.lru_cache(maxsize=64)
def _validator(schema_json: str) -> Any:
    import jsonschema  # noqa: PLC0415 (55 ms: only where a spec has a schema)

    schema = json.loads(schema_json)
    return jsonschema.validators.validator_for(schema)(schema)


def _is_json(spec: IsJsonSpec, answer: str) -> Score:
    try:
        parsed = json.loads(answer.strip())
    except ValueError as e:  # JSONDecodeError, and a number too long to convert
        return _pass(False, f"is-json: not JSON ({e})")
    if spec.json_schema is None:
        return _pass(True, "is-json: valid JSON")
    validator = _validator(json.dumps(spec.json_schema, sort_keys=True))
    errors = sorted(validator.iter_errors(parsed), key=lambda e: (list(e.absolute_path), e.message))
    if not errors:
        return _pass(True, "is-json: valid JSON under the schema")
    first = errors[0]
    where = "/" + "/".join(str(p) for p in first.absolute_path)
    return _pass(False, f"is-json: not valid under the schema at {where}: {first.message[:200]}")


def _max_length(spec: MaxLengthSpec, answer: str) -> Score:
    text = answer.strip()
    over = []
    if spec.chars is not None and len(text) > spec.chars:
        over.append(f"answer is {len(text):,} characters; max-length {spec.chars:,}")
    words = len(text.split())
    if spec.words is not None and words > spec.words:
        over.append(f"answer is {words:,} words; max-length {spec.words:,} words")
    if over:
        return _pass(False, "; ".join(over))
    within = ([f"{len(text):,} of {spec.chars:,} characters"] if spec.chars is not None else []) + (
        [f"{words:,} of {spec.words:,} words"] if spec.words is not None else []
    )
    return _pass(True, "answer is " + " and ".join(within))


def cited_chunks(capture: Capture) -> list[int]:
    """Ranks of the retrieved chunks (all of them, not only the top K) the answer cites. A numbered marker
    ([n], [2, 3], [Source 4], as the `source_cited` rule reads them) cites the chunk of rank n. A document the
    answer cites (a reference, a path written in the answer, a [[wiki link]]; rules.cited_sources) cites one
    chunk: its best-ranked retrieved chunk, unless a marker cites a chunk of that document already. A path
    matches a chunk's rel_path itself or as a tail at a '/' (the fabricated-source rule's matching), a wiki
    link a chunk whose file stem it is."""
    chunks = capture.retrieved
    ranks = {c.rank for c in chunks}
    cited = {int(n) for m in _MARKER.finditer(capture.answer) for n in m.group(1).split(",")} & ranks
    paths, wiki = rules.cited_sources(capture.answer, capture.references)

    def stem(path: str) -> str:
        return path.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()

    documents = [lambda c, p=p: c.rel_path == p or c.rel_path.endswith("/" + p) for p in sorted(paths)]
    documents += [lambda c, w=w: stem(c.rel_path) == w for w in sorted(wiki)]
    for matches in documents:
        of_document = sorted(c.rank for c in chunks if c.rel_path and matches(c))
        if of_document and not cited & set(of_document):
            cited.add(of_document[0])
    return sorted(cited)


def _cites(spec: CitesSpec, capture: Capture) -> Score:
    n = len(capture.retrieved)
    if not n:
        return Score.undefined("cites: no retrieved chunk to cite")
    ranks = cited_chunks(capture)
    which = f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})" if ranks else ""
    said = f"cites {len(ranks)} of the {n} retrieved chunk{'s' if n > 1 else ''}{which}"
    if len(ranks) >= spec.at_least:
        return _pass(True, said)
    return _pass(False, f"{said}; cites needs {spec.at_least}")


def latency(capture: Capture, stage: str | None) -> tuple[str, float | None]:
    """(stage, ms) of a capture: the stage named, else the target's `total` where it reports one, else
    `wall` (measured around the call)."""
    times = capture.latency_ms
    if stage is None:
        stage = "total" if times.total is not None else "wall"
    return stage, getattr(times, stage)


def _latency_below(spec: LatencyBelowSpec, capture: Capture) -> Score:
    return latency_score(spec, *latency(capture, spec.stage))


def latency_score(spec: LatencyBelowSpec, stage: str, ms: float | None) -> Score:
    """latency-below on the capture's latency of `stage` (None: the capture has none)."""
    if ms is None:
        return Score.undefined(f"latency-below: no {stage} latency in the capture")
    said = f"latency {stage} {_num(ms)} ms"
    if ms < spec.ms:
        return _pass(True, f"{said} (below {_num(spec.ms)} ms)")
    return _pass(False, f"{said}; latency-below {_num(spec.ms)} ms")


def _cost_below(spec: CostBelowSpec, capture: Capture) -> Score:
    return cost_score(spec, capture.cost_usd)


def cost_score(spec: CostBelowSpec, cost: float | None) -> Score:
    """cost-below on the capture's cost in US dollars (None: the target reports none)."""
    if cost is None:
        return Score.undefined("cost-below: the target reports no cost")
    said = f"cost ${cost:.6g}"
    if cost < spec.usd:
        return _pass(True, f"{said} (below ${spec.usd:.6g})")
    return _pass(False, f"{said}; cost-below ${spec.usd:.6g}")


ON_ANSWER: dict[str, Callable[[Any, str], Score]] = {
    "contains": _contains,
    "not-contains": _contains,
    "regex": _regex,
    "not-regex": _regex,
    "equals": _equals,
    "is-json": _is_json,
    "max-length": _max_length,
}
ON_CAPTURE: dict[str, Callable[[Any, Capture], Score]] = {
    "cites": _cites,
    "latency-below": _latency_below,
    "cost-below": _cost_below,
}


def evaluate(spec: AssertionSpec, capture: Capture) -> Score:
    """One assertion on one capture: 1 or 0 with a reason, undefined when it cannot apply, and a
    `metric_error` row (its exception's type and message) should evaluating it raise."""
    if spec.type in ON_ANSWER:
        return check_answer(spec, capture.answer)
    return _guarded(ON_CAPTURE[spec.type], spec, capture)


def check_answer(spec: AssertionSpec, answer: str) -> Score:
    """An assertion of the answer alone (its type in ON_ANSWER) on an answer."""
    return _guarded(ON_ANSWER[spec.type], spec, answer)


def _guarded(check: Callable[[Any, Any], Score], spec: AssertionSpec, on: Any) -> Score:
    try:
        return check(spec, on)
    except Exception as e:  # noqa: BLE001 - one case's failure is that case's row (e.g. an unresolvable $ref)
        return Score(math.nan, "metric_error", f"{spec.type}: {type(e).__name__}: {str(e)[:300]}")
