"""The one labelled-item format of `raglake metaeval` (docs/metaeval.md): a JSONL file, one item a line,
whatever the data set. An item is what a metric sees (question, answer, contexts, reference) plus what a
person said about it (`label`, of a `label_kind`)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from raglake import outputs
from raglake.errors import ConfigError, InputError, did_you_mean

# label kind -> the yardstick (raglake.metrics.registry.YARDSTICKS) of the metrics held against it
LABEL_KINDS = {
    "similarity": "similarity",
    "support": "support",
    "correctness": "correctness",
    "preference": "correctness",
}
SUPPORT_LABELS = ("supported", "not_supported")
CORRECTNESS_LABELS = ("correct", "wrong")


class LabelledItem(BaseModel):
    """One labelled item. `label`: a number for similarity (any scale) and preference (answer_b over answer:
    positive when answer_b is better), supported/not_supported for support, correct/wrong for correctness."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    dataset: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    label_kind: Literal["similarity", "support", "correctness", "preference"]
    label: float | str | bool
    answer: str
    question: str = ""
    contexts: list[str] = []
    reference: str | None = None
    answer_b: str | None = Field(None, validate_default=True)  # preference only: the second answer
    group: str | None = None  # items that move together in the bootstrap (one answer's sentences, one pair)
    split: str = "all"  # dev / heldout / all: figures are given per split
    meta: dict[str, Any] = {}

    @field_validator("label")
    @classmethod
    def _label(cls, label: float | str | bool, info: ValidationInfo) -> float | str | bool:
        kind = info.data.get("label_kind")
        if kind in ("similarity", "preference"):
            if isinstance(label, bool) or not isinstance(label, (int, float)) or not math.isfinite(label):
                raise ValueError(f"a {kind} label is a finite number, got {label!r}")
        elif kind == "support" and label not in SUPPORT_LABELS:
            hint = did_you_mean(str(label), SUPPORT_LABELS)
            raise ValueError(f"a support label is one of {', '.join(SUPPORT_LABELS)}, got {label!r}{hint}")
        elif kind == "correctness" and label not in (*CORRECTNESS_LABELS, True, False):
            hint = did_you_mean(str(label), CORRECTNESS_LABELS)
            raise ValueError(f"a correctness label is correct or wrong (or true/false), got {label!r}{hint}")
        return label

    @field_validator("answer_b")
    @classmethod
    def _answer_b(cls, answer_b: str | None, info: ValidationInfo) -> str | None:
        if (info.data.get("label_kind") == "preference") != (answer_b is not None):
            raise ValueError("answer_b is given exactly when label_kind is preference")
        return answer_b

    @property
    def cluster(self) -> str:
        return self.group or self.id

    @property
    def positive(self) -> bool:
        """support: not supported (what a detector should flag); correctness: correct."""
        return self.label in ("not_supported", "correct", True)


def read_items(path: str | Path) -> list[LabelledItem]:
    """Every item of a labelled JSONL file; a bad line is an InputError naming the file, line and field."""
    items, seen = [], set()
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(str(path), n, None, f"not JSON: {e.msg}") from None
            if not isinstance(data, dict):
                raise InputError(str(path), n, None, "each line is one JSON object")
            unknown = sorted(set(data) - set(LabelledItem.model_fields))
            if unknown:
                hint = did_you_mean(unknown[0], LabelledItem.model_fields)
                raise InputError(str(path), n, unknown[0], f"not a field of a labelled item{hint}")
            try:
                item = LabelledItem.model_validate(data)
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(p) for p in err["loc"]) or None
                raise InputError(str(path), n, where, err["msg"].removeprefix("Value error, ")) from None
            if (item.dataset, item.id) in seen:
                raise InputError(str(path), n, "id", f"id {item.id!r} appears twice in data set {item.dataset!r}")
            seen.add((item.dataset, item.id))
            items.append(item)
    if not items:
        raise InputError(str(path), None, None, "no labelled items in the file")
    return items


def write_items(path: str | Path, items: list[LabelledItem]) -> None:
    """Items as JSONL (fields left at their defaults are left out), through raglake.outputs: never
    through a link or onto a device, never a partial file."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot make the folder {Path(path).parent}: {e.strerror or e}") from None
    with outputs.writing(path, "the labelled items") as f:
        f.writelines(item.model_dump_json(exclude_defaults=True) + "\n" for item in items)
