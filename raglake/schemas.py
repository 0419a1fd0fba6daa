"""The data model of DESIGN.md as pydantic models: golden cases, labels and captures."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from raglake.anchors import heading_segments, heading_string, normalise_rel_path
from raglake.assertion_specs import AssertionSpec
from raglake.errors import did_you_mean
from raglake.textfiles import MAX_NESTING

CATEGORIES = ("factual", "reasoning", "multi_hop", "recency_conflict", "general", "adversarial")
DIFFICULTIES = ("easy", "medium", "hard")
ACTIONS = ("answer", "clarify", "refuse")
RECENCY_RULES = ("cite_newer", "cite_both", "acknowledge_both")
CAPTURE_STATUSES = ("ok", "error", "timeout", "empty")
FAILED_STATUSES = ("error", "timeout")  # the target gave no usable output
FOLDER_MODES = ("off", "on", "on_with_fallback")
CHUNK_LABELS = ("topically_relevant", "evidence_sufficient", "misleading")
ANSWER_LABELS = (
    "support_present",
    "unsupported_claim_present",
    "contradicted_claim_present",
    "source_cited",
    "fabricated_source",
    "proper_action",
    "response_on_topic",
    "helpful",
    "incomplete",
    "unsafe_content",
    "acknowledges_conflict",
)


def _choice(value: Any, choices: tuple[str, ...], kind: str) -> str:
    """Canonical spelling of an enumerated value ('recency/conflict' -> 'recency_conflict')."""
    if not isinstance(value, str):
        raise ValueError(f"{kind} must be a string, got {type(value).__name__}")
    canon = value.strip().lower().replace("/", "_").replace("-", "_").replace(" ", "_")
    if canon in choices:
        return canon
    raise ValueError(f"unknown {kind} {value!r}{did_you_mean(canon, choices)}; expected one of {', '.join(choices)}")


# Validation context for data that is a model's own dump (a spool's or staged batch's lines, the lake's
# golden_case, a journal): its anchors are normal already and are taken as they are. Normalising them again
# is not the same: "./ a.md" is " a.md" once and "a.md" twice; "A/B >" is the one segment ("A/B",), whose
# list ["A/B"] would split at "/". METRICS.md's rule applies once, to what the user wrote.
CANONICAL = {"canonical": True}


def _canonical(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("canonical"))


def _segments(value: Any, info: ValidationInfo) -> tuple[str, ...]:
    if _canonical(info):
        if isinstance(value, (list, tuple)):
            return tuple(value)
        if isinstance(value, str):  # the lake's "A > B": the segments joined by " > "
            return tuple(value.split(" > ")) if value else ()
    if value is None or isinstance(value, (str, list, tuple)):
        return heading_segments(value)
    raise ValueError(f"heading_path must be a string like 'A > B' or a list of headings, got {type(value).__name__}")


def _rel_path(value: Any, info: ValidationInfo) -> str:
    if not isinstance(value, str):
        raise ValueError(f"rel_path must be a string, got {type(value).__name__}")
    return value if _canonical(info) else normalise_rel_path(value)


def _id(value: Any) -> Any:
    """An int id becomes text; a blank one is refused."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and not value.strip():
        raise ValueError(f"the id is blank ({value!r})")
    return value


def _plain_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Free-form metadata must fit the lake: finite numbers, at most MAX_NESTING levels, 100,000 values."""
    stack, count = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > MAX_NESTING or count > 100_000:
            raise ValueError(
                f"metadata is nested deeper than {MAX_NESTING} levels"
                if depth > MAX_NESTING
                else "metadata holds more than 100,000 values"
            )
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"metadata holds {item!r}; NaN and Infinity are not allowed")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)
    return value


HeadingPath = Annotated[tuple[str, ...], BeforeValidator(_segments)]
RelPath = Annotated[str, BeforeValidator(_rel_path)]
Id = Annotated[str, BeforeValidator(_id), Field(min_length=1)]
# strict: "yes", 1 or "0.5" are refused; an int is still a valid float; NaN and Infinity are refused
Binary = Annotated[StrictInt, Field(ge=0, le=1)]
Number = Annotated[float, Strict(), AllowInfNan(False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Anchor(_Strict):
    rel_path: RelPath
    heading_path: HeadingPath = ()

    @property
    def heading(self) -> str:
        return heading_string(self.heading_path)


class GoldSupport(Anchor):
    snippets: list[str] = Field(default_factory=list)
    date: dt.date | None = None
    required: StrictBool = False


class ChunkLabel(Anchor):
    """Human relevance labels for a passage (by anchor), whichever run retrieves it."""

    topically_relevant: Binary | None = None
    evidence_sufficient: Binary | None = None
    misleading: Binary | None = None


class AnswerLabel(_Strict):
    """Human labels for one captured answer; applies when method and answer hash match."""

    method: str | None = None
    answer_sha256: str | None = Field(default=None, min_length=8, pattern=r"^[0-9a-f]+$")
    support_present: Binary | None = None
    unsupported_claim_present: Binary | None = None
    contradicted_claim_present: Binary | None = None
    source_cited: Binary | None = None
    fabricated_source: Binary | None = None
    proper_action: Binary | None = None
    response_on_topic: Binary | None = None
    helpful: Binary | None = None
    incomplete: Binary | None = None
    unsafe_content: Binary | None = None
    acknowledges_conflict: Binary | None = None

    def applies_to(self, method: str | None, answer: str) -> bool:
        if self.method is not None and self.method != method:
            return False
        return self.answer_sha256 is None or answer_sha256(answer).startswith(self.answer_sha256)


class CaseLabels(_Strict):
    chunks: list[ChunkLabel] = Field(default_factory=list)
    answers: list[AnswerLabel] = Field(default_factory=list)


def content_text(value: Any) -> str:
    """A record's JSON-mode dump (or a part of one) as the golden set's content hash reads it
    (raglake.golden.content_hash): json.dumps with sorted keys, non-ASCII as it is."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def answer_sha256(answer: str) -> str:
    return hashlib.sha256((answer or "").strip().encode("utf-8")).hexdigest()


class GoldenCase(_Strict):
    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    id: Id
    question: str = Field(min_length=1)
    reference_answer: str | None = None
    answerable: StrictBool = True
    category: str | None = None
    difficulty: str | None = None
    tags: list[str] = Field(default_factory=list)
    vault: str | None = None
    expected_action: str | None = None
    gold_supports: list[GoldSupport] = Field(default_factory=list)
    required_support_groups: list[list[StrictInt]] = Field(default_factory=list)
    recency_conflict_rule: str | None = None
    labels: CaseLabels | None = None
    # the question's own assertions (raglake.metrics.assertions: the metric question_assertions); written
    # `assert:` (a Python keyword, so the field has another name), dumped only when there are some, so the
    # canonical line and content hash of a case without any stay what they were; metadata stays the last key
    assertions: list[AssertionSpec] = Field(
        default_factory=list, alias="assert", exclude_if=lambda v: not v, description="the question's own assertions"
    )
    metadata: Annotated[dict[str, Any], AfterValidator(_plain_metadata)] = Field(default_factory=dict)

    @field_validator("tags")
    @classmethod
    def _distinct_tags(cls, v: list[str]) -> list[str]:
        """A repeated tag would count the case twice in that tag's slice; first-seen order is kept."""
        return list(dict.fromkeys(v))

    @field_validator("category")
    @classmethod
    def _category(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, CATEGORIES, "category")

    @field_validator("difficulty")
    @classmethod
    def _difficulty(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, DIFFICULTIES, "difficulty")

    @field_validator("expected_action")
    @classmethod
    def _action(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, ACTIONS, "expected_action")

    @field_validator("recency_conflict_rule")
    @classmethod
    def _rule(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, RECENCY_RULES, "recency_conflict_rule")

    @model_validator(mode="after")
    def _consistent(self) -> GoldenCase:
        n = len(self.gold_supports)
        for g, group in enumerate(self.required_support_groups):
            if not group:
                raise ValueError(f"required_support_groups[{g}] is empty")
            bad = [i for i in group if not 0 <= i < n]
            if bad:
                raise ValueError(
                    f"required_support_groups[{g}] names support index {bad[0]}, "
                    f"but the case has {n} gold_supports (indexes 0..{n - 1})"
                )
        if self.recency_conflict_rule == "cite_newer" and not any(s.date for s in self.gold_supports):
            raise ValueError("recency_conflict_rule 'cite_newer' needs gold_supports with a 'date'")
        if self.expected_action is None:
            self.expected_action = "answer" if self.answerable else "refuse"
        return self


class RetrievedChunk(Anchor):
    rank: StrictInt = Field(ge=1)
    text: str = ""
    score: Number | None = None
    chunk_id: str | None = None


class Reference(Anchor):
    pass


class Latency(_Strict):
    """Stage timings in milliseconds: the target's own, plus `wall` measured around the call."""

    folder_selection: Number | None = Field(default=None, ge=0)
    retrieval: Number | None = Field(default=None, ge=0)
    generation: Number | None = Field(default=None, ge=0)
    total: Number | None = Field(default=None, ge=0)
    wall: Number | None = Field(default=None, ge=0)


LATENCY_STAGES = tuple(Latency.model_fields)


class Capture(_Strict):
    """What a target returned for one case in one run."""

    case_id: Id
    answer: str = ""
    abstained: StrictBool | None = None
    references: list[Reference] = Field(default_factory=list)
    retrieved: list[RetrievedChunk] = Field(default_factory=list)
    method: str | None = None
    status: Literal["ok", "error", "timeout", "empty"] = "ok"
    error: str | None = None
    latency_ms: Latency = Field(default_factory=Latency)
    folder_mode: str | None = None
    selected_folders: list[str] = Field(default_factory=list)
    attempts: StrictInt | None = Field(default=None, ge=1)  # requests it took (live targets)
    # what the target says the call cost, in US dollars (None: it says nothing); dumped only when given, so the
    # canonical line and content hash of a capture without one stay what they were (its key last: appended)
    cost_usd: Number | None = Field(default=None, ge=0, exclude_if=lambda v: v is None)

    @field_validator("answer", mode="before")
    @classmethod
    def _answer(cls, v: Any) -> Any:
        return "" if v is None else v

    @field_validator("folder_mode")
    @classmethod
    def _folder_mode(cls, v: str | None) -> str | None:
        return None if v is None else _choice(v, FOLDER_MODES, "folder_mode")

    @model_validator(mode="after")
    def _derive(self) -> Capture:
        ranks = [c.rank for c in self.retrieved]
        if len(set(ranks)) != len(ranks):
            dup = sorted({r for r in ranks if ranks.count(r) > 1})
            raise ValueError(f"retrieved has duplicate rank(s) {dup}")
        if sorted(ranks) != ranks:
            self.retrieved = sorted(self.retrieved, key=lambda c: c.rank)
        if self.status == "ok" and not self.answer.strip() and not self.abstained:
            self.status = "empty"
        return self

    @property
    def failed(self) -> bool:
        """The target gave no usable output (error or timeout)."""
        return self.status in FAILED_STATUSES

    def top_k(self, k: int) -> list[RetrievedChunk]:
        return [c for c in self.retrieved if c.rank <= k]
