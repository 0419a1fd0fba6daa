"""Assertions (promptfoo-style, deterministic, no judge): the spec models an eval file's `assertions:` and a
golden case's `assert:` list are validated into. They sit beside raglake.schemas because a golden case holds a
list of them; raglake.metrics.assertions evaluates them.

One model per type, told apart by `type` (a discriminated union). promptfoo's names are accepted and
rewritten into these (`icontains` is `contains` with `case_sensitive: false`, `latency`'s `threshold` is
`latency-below`'s `ms`, …), so a spec's canonical form, its dump and its content hash do not depend on the
spelling. Every problem is a ValueError with one plain sentence (the golden set's and the eval file's
readers add file, line and key)."""

from __future__ import annotations

import functools
import json
import re
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator, model_validator

from raglake.errors import did_you_mean

ASSERTION_TYPES = (
    "contains",
    "not-contains",
    "regex",
    "not-regex",
    "equals",
    "is-json",
    "max-length",
    "cites",
    "latency-below",
    "cost-below",
)
# promptfoo's names: the canonical type and the fields the name sets
PROMPTFOO_TYPES: dict[str, tuple[str, dict[str, Any]]] = {
    "icontains": ("contains", {"case_sensitive": False}),
    "contains-any": ("contains", {"match": "any"}),
    "contains-all": ("contains", {"match": "all"}),
    "icontains-any": ("contains", {"case_sensitive": False, "match": "any"}),
    "icontains-all": ("contains", {"case_sensitive": False, "match": "all"}),
    "not-icontains": ("not-contains", {"case_sensitive": False}),
    "not-contains-any": ("not-contains", {"match": "any"}),
    "not-contains-all": ("not-contains", {"match": "all"}),
    "not-icontains-any": ("not-contains", {"case_sensitive": False, "match": "any"}),
    "not-icontains-all": ("not-contains", {"case_sensitive": False, "match": "all"}),
    "latency": ("latency-below", {}),
    "cost": ("cost-below", {}),
}
# promptfoo's field names (`value`, `threshold`) for the canonical field of a type, where the two differ
PROMPTFOO_FIELDS = {
    "regex": {"value": "pattern"},
    "not-regex": {"value": "pattern"},
    "is-json": {"value": "schema"},
    "max-length": {"value": "chars"},
    "cites": {"value": "at_least"},
    "latency-below": {"threshold": "ms", "value": "ms"},
    "cost-below": {"threshold": "usd", "value": "usd"},
}
# the capture's latency stages (raglake.schemas.LATENCY_STAGES; a test holds the two equal)
STAGES = ("folder_selection", "retrieval", "generation", "total", "wall")


class _Spec(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True
    )

    def canonical_json(self) -> str:
        """The spec as JSON with sorted keys (every field, defaults included): what its version hashes."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)


def _no_empty(value: str | list[str]) -> str | list[str]:
    if isinstance(value, list) and not value:
        raise ValueError("`value` is an empty list: give a string or a list of strings")
    for v in [value] if isinstance(value, str) else value:
        if not v:
            raise ValueError("an empty string is in every answer: give a non-empty `value`")
    return value


class ContainsSpec(_Spec):
    """The answer contains a string, or all (`match: all`) or any (`match: any`) of a list of strings."""

    type: Literal["contains"] = Field(description="contains: the answer holds the string(s) of `value`")
    value: Union[str, list[str]] = Field(description="a string, or a list of strings")
    match: Literal["all", "any"] = Field("all", description="for a list: all of them (default) or any one of them")
    case_sensitive: StrictBool = Field(True, description="compare case (promptfoo's `contains`); false: `icontains`")

    _value = field_validator("value")(_no_empty)


class NotContainsSpec(_Spec):
    """The negation of `contains` with the same `match`: by default (`any`) a list is of forbidden strings."""

    type: Literal["not-contains"] = Field(description="not-contains: the answer does not hold the string(s)")
    value: Union[str, list[str]] = Field(description="a string, or a list of strings")
    match: Literal["any", "all"] = Field(
        "any", description="for a list: fails when any one is found (default) or only when all are found"
    )
    case_sensitive: StrictBool = Field(True, description="compare case; false: `not-icontains`")

    _value = field_validator("value")(_no_empty)


@functools.lru_cache(maxsize=256)
def compiled(pattern: str, case_sensitive: bool = True) -> re.Pattern[str]:
    """The pattern compiled (Python's `re` syntax), once per process."""
    return re.compile(pattern, 0 if case_sensitive else re.IGNORECASE)


def _compiles(pattern: str) -> str:
    try:
        compiled(pattern)
    except (re.error, RecursionError, OverflowError) as e:
        raise ValueError(f"invalid regex {pattern!r}: {e}") from None
    return pattern


class RegexSpec(_Spec):
    """The answer matches a regular expression (Python `re`, searched anywhere in the answer)."""

    type: Literal["regex"] = Field(description="regex: the pattern is found in the answer")
    pattern: str = Field(min_length=1, description="a Python regular expression (re.search over the answer)")
    case_sensitive: StrictBool = Field(True, description="false: ignore case (as the (?i) flag)")

    _pattern = field_validator("pattern")(_compiles)


class NotRegexSpec(_Spec):
    """The answer does not match a regular expression."""

    type: Literal["not-regex"] = Field(description="not-regex: the pattern is not found in the answer")
    pattern: str = Field(min_length=1, description="a Python regular expression (re.search over the answer)")
    case_sensitive: StrictBool = Field(True, description="false: ignore case (as the (?i) flag)")

    _pattern = field_validator("pattern")(_compiles)


class EqualsSpec(_Spec):
    """The answer is exactly a string (optionally ignoring case and runs of whitespace)."""

    type: Literal["equals"] = Field(description="equals: the answer is exactly `value`")
    value: str = Field(description="the expected answer")
    case_sensitive: StrictBool = Field(True, description="false: compare casefolded")
    normalise_whitespace: StrictBool = Field(
        False, description="true: strip both ends and read every run of whitespace as one space"
    )


def check_json_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema, checked against its own metaschema (its `$schema`, else the latest draft)."""
    import jsonschema  # noqa: PLC0415 (55 ms: only where a spec has a schema)

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as e:
        where = "/" + "/".join(str(p) for p in e.absolute_path) if e.absolute_path else ""
        raise ValueError(
            f"schema is not a valid JSON Schema{' (at ' + where + ')' if where else ''}: {e.message}"
        ) from None
    return schema


class IsJsonSpec(_Spec):
    """The answer parses as JSON and, with `schema`, is valid under that JSON Schema."""

    type: Literal["is-json"] = Field(description="is-json: the whole answer (trimmed) parses as JSON")
    json_schema: Union[dict[str, Any], None] = Field(
        None, alias="schema", description="a JSON Schema the parsed answer must be valid under"
    )

    _schema = field_validator("json_schema")(lambda v: v if v is None else check_json_schema(v))


class MaxLengthSpec(_Spec):
    """The answer (trimmed) is at most `chars` characters and/or `words` words."""

    type: Literal["max-length"] = Field(description="max-length: the answer is no longer than the limit(s)")
    chars: Union[int, None] = Field(None, ge=0, description="at most this many characters (the trimmed answer)")
    words: Union[int, None] = Field(None, ge=0, description="at most this many words (runs of non-space)")

    @model_validator(mode="after")
    def _a_limit(self) -> MaxLengthSpec:
        if self.chars is None and self.words is None:
            raise ValueError("max-length needs `chars` or `words` (or both)")
        return self


class CitesSpec(_Spec):
    """The answer cites at least `at_least` of the chunks the target retrieved (raglake.metrics.assertions)."""

    type: Literal["cites"] = Field(
        description="cites: the answer cites retrieved chunks ([n] markers, paths, references)"
    )
    at_least: int = Field(1, ge=1, description="how many distinct retrieved chunks it must cite")


class LatencyBelowSpec(_Spec):
    """The capture's latency (its `total`, else `wall`; or the stage named) is below a limit."""

    type: Literal["latency-below"] = Field(description="latency-below: the capture's latency is under `ms`")
    ms: float = Field(gt=0, allow_inf_nan=False, description="the limit in milliseconds (strictly below passes)")
    stage: Union[Literal[STAGES], None] = Field(  # type: ignore[valid-type]
        None,
        description="which latency: a stage of the capture's; by default the target's `total` where it reports "
        "one, else `wall` (measured around the call)",
    )


class CostBelowSpec(_Spec):
    """The capture's cost, where the target reports one, is below a limit."""

    type: Literal["cost-below"] = Field(description="cost-below: the capture's cost is under `usd`")
    usd: float = Field(gt=0, allow_inf_nan=False, description="the limit in US dollars (strictly below passes)")


SPEC_MODELS: dict[str, type[_Spec]] = {
    "contains": ContainsSpec,
    "not-contains": NotContainsSpec,
    "regex": RegexSpec,
    "not-regex": NotRegexSpec,
    "equals": EqualsSpec,
    "is-json": IsJsonSpec,
    "max-length": MaxLengthSpec,
    "cites": CitesSpec,
    "latency-below": LatencyBelowSpec,
    "cost-below": CostBelowSpec,
}


def _keys(model: type[_Spec]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def _canonical(value: Any) -> Any:
    """A spec as written (promptfoo's names too) into the canonical type's fields; unknown types and keys are
    refused here, with "did you mean", before the union dispatches on `type`."""
    if isinstance(value, _Spec):
        return value
    if not isinstance(value, dict):
        raise ValueError(
            f"an assertion is a mapping with a `type` ({', '.join(ASSERTION_TYPES)}), got {type(value).__name__}"
        )
    kind = value.get("type")
    if kind is None:
        raise ValueError(f"an assertion needs a `type`: one of {', '.join(ASSERTION_TYPES)}")
    if not isinstance(kind, str) or (kind not in SPEC_MODELS and kind not in PROMPTFOO_TYPES):
        known = (*ASSERTION_TYPES, *PROMPTFOO_TYPES)
        raise ValueError(
            f"unknown assertion type {kind!r}{did_you_mean(str(kind), known)}; one of {', '.join(ASSERTION_TYPES)}"
        )
    canonical, preset = PROMPTFOO_TYPES.get(kind, (kind, {}))
    model, out = SPEC_MODELS[canonical], {}
    renames = PROMPTFOO_FIELDS.get(canonical, {})
    for key, item in value.items():
        name = renames.get(key, key) if key not in _keys(model) and key not in model.model_fields else key
        if name not in _keys(model) and name not in model.model_fields:
            raise ValueError(
                f"unknown key {key!r} in a {canonical} assertion{did_you_mean(str(key), _keys(model))}; "
                f"its keys: {', '.join(_keys(model))}"
            )
        if name in out:
            raise ValueError(f"{key!r} and {name!r} are one key of a {canonical} assertion: give one")
        out[name] = item
    clash = [k for k in preset if k in out and out[k] != preset[k]]
    if clash:
        raise ValueError(f"type {kind!r} sets {clash[0]}={preset[clash[0]]!r}; the spec says {out[clash[0]]!r}")
    return {**out, **preset, "type": canonical}


AssertionSpec = Annotated[
    Union[
        ContainsSpec,
        NotContainsSpec,
        RegexSpec,
        NotRegexSpec,
        EqualsSpec,
        IsJsonSpec,
        MaxLengthSpec,
        CitesSpec,
        LatencyBelowSpec,
        CostBelowSpec,
    ],
    Field(discriminator="type"),
    BeforeValidator(_canonical),
]
