"""A user's own judge rubrics (GEval-style: a criterion, evaluation steps, a score range) as judge metrics.

In an eval file (or a YAML file of its own, named relative to the eval file):

    rubrics:
      polite_tone: {criteria: "Is the answer courteous and free of blame?", inputs: [answer], threshold: 4}
      cites_policy: rubrics/cites_policy.yaml     # a mapping of the same fields

Each rubric NAME becomes
- the judge metric NAME (family judge, origin rubric): the judge's integer score on the rubric's scale (the
  registry's scale "lo-hi", e.g. "1-5"; higher is better unless `higher_is_better: false`);
- with `threshold`, the 0/1 metric NAME_pass: 1 when the score reaches the threshold (score >= threshold;
  score <= threshold where lower is better), higher is better;
both reading one judge step, `rubric_NAME`, one call per case of its own prompt (id `rubric_NAME`),
written from the rubric: the criterion, the evaluation steps, the scale, and the inputs fenced as data
like every packaged prompt's; the reply is {"reasoning": ..., "score": integer in the scale}, checked by
the judge's schema and honesty checks. The judge layer versions that prompt by the hash of its rendered
template (raglake.judge.prompts.content_version), so an edited criterion is a new prompt version: its
calls are new (the ledger keys them by version and messages) and `raglake rescore` recomputes it. A
metric's own version is RUBRIC_VERSION plus a hash of what its value depends on (the prompt; for NAME_pass
also the threshold and direction).

A rubric with `yardstick:` is held against people's labels by `raglake metaeval --data` like a built-in
metric of that yardstick (NAME_pass too: its 0/1 is the rubric's own decision)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from raglake.errors import ConfigError, did_you_mean
from raglake.metrics.context import CaseContext
from raglake.metrics.judge import from_step
from raglake.metrics.registry import YARDSTICKS, Metric, Score, add_metric
from raglake.metrics.steps import VIEW_INPUTS, JudgeStep, add_step, defined_step
from raglake.records import read_yaml_mapping, validate_record

RUBRIC_VERSION = "1"  # how a rubric becomes a prompt and a value; bump when that changes
PASS_SUFFIX = "_pass"  # NAME_pass: the 0/1 metric of a rubric with a threshold
STEP_PREFIX = "rubric_"  # the judge step and prompt id of rubric NAME: rubric_NAME
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,59}$")
MAX_SPAN = 100  # widest scale (hi - lo): a judge does not tell finer grades apart
MAX_TOKENS = 512
# the judge's template placeholders ({{name}}): not allowed in the user's text, which is no template
_PLACEHOLDER = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}")
BASE_DIR_CONTEXT = "base_dir"  # validation context key: the folder a rubric file's path is relative to
_LABELS = {
    "question": "Question",
    "answer": "Answer",
    "contexts": "Retrieved context (numbered chunks)",
    "reference": "Reference answer",
}


def _file_form(schema: dict[str, Any]) -> None:
    """The JSON Schema of a rubric: its fields, or the path of a YAML file holding them."""
    fields = dict(schema)
    schema.clear()
    schema.update(
        title=fields.get("title", "RubricSpec"),
        anyOf=[
            fields,
            {"type": "string", "description": "a YAML file of the rubric's fields, relative to the eval file"},
        ],
    )


class RubricSpec(BaseModel):
    """One judge rubric: what the judge scores, on which inputs, on which scale."""

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra=_file_form)

    criteria: str = Field(description="what the judge scores, in plain words (e.g. 'Is the answer courteous?')")
    steps: list[str] | None = Field(
        None, description="evaluation steps the judge follows, in order (default: read, compare, score)"
    )
    inputs: list[str] = Field(
        default_factory=lambda: ["question", "answer"],
        description="what the judge sees of a case: question, answer, contexts (retrieved chunks), reference",
        json_schema_extra={"items": {"type": "string", "enum": list(VIEW_INPUTS)}, "uniqueItems": True},
    )
    scale: tuple[int, int] = Field(
        (1, 5), description="the lowest and highest score, integers: [lo, hi] with 0 <= lo < hi, hi - lo <= 100"
    )
    threshold: float | None = Field(
        None, description="pass mark on the scale: adds the 0/1 metric <name>_pass (score >= threshold)"
    )
    yardstick: str | None = Field(
        None,
        description=f"what people label that it can be held against in `raglake metaeval`: {', '.join(YARDSTICKS)}",
        json_schema_extra={"enum": list(YARDSTICKS)},
    )
    higher_is_better: bool = Field(True, description="is a higher score better (false: the criterion names a fault)")
    description: str | None = Field(None, description="one line for the metric tables (default: the criteria)")

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any, info: ValidationInfo) -> Any:
        """A string is the path of a rubric file (relative to the validation context's base_dir)."""
        if isinstance(data, str):
            base = Path((info.context or {}).get(BASE_DIR_CONTEXT) or ".")
            return load_rubric_file(base / data).model_dump()
        return data

    @field_validator("criteria")
    @classmethod
    def _criteria(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a rubric needs criteria: what the judge scores, in plain words")
        return _no_placeholder(value.strip(), "criteria")

    @field_validator("steps")
    @classmethod
    def _steps(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and not value:
            raise ValueError("steps, when given, lists at least one evaluation step (or leave it out)")
        if any(not s.strip() for s in value or []):
            raise ValueError("an evaluation step is empty")
        return None if value is None else [_no_placeholder(s.strip(), "an evaluation step") for s in value]

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"a rubric reads at least one input: {', '.join(VIEW_INPUTS)}")
        for name in value:
            if name not in VIEW_INPUTS:
                raise ValueError(
                    f"unknown input {name!r}{did_you_mean(name, VIEW_INPUTS)}: use {', '.join(VIEW_INPUTS)}"
                )
        if len(set(value)) < len(value):
            raise ValueError("an input is named twice")
        return [n for n in VIEW_INPUTS if n in value]  # the prompt shows them in this order

    @field_validator("scale", mode="before")
    @classmethod
    def _scale(cls, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ValueError("scale is a pair of integers [lo, hi], e.g. [1, 5]")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"scale is a pair of integers [lo, hi], got {list(value)!r}")
        lo, hi = value
        if not 0 <= lo < hi or hi - lo > MAX_SPAN:
            raise ValueError(f"scale [{lo}, {hi}]: need 0 <= lo < hi and at most {MAX_SPAN} points between them")
        return value

    @field_validator("threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("threshold is a number on the rubric's scale, not true/false")
        return value

    @field_validator("threshold")
    @classmethod
    def _threshold_on_scale(cls, value: float | None, info: ValidationInfo) -> float | None:
        lo, hi = info.data.get("scale", (None, None))  # no scale here: the scale's own error is reported
        if value is not None and lo is not None and not lo <= value <= hi:
            raise ValueError(f"threshold {value:g} is outside the scale [{lo}, {hi}]")
        return value

    @field_validator("yardstick")
    @classmethod
    def _yardstick(cls, value: str | None) -> str | None:
        if value is not None and value not in YARDSTICKS:
            raise ValueError(
                f"unknown yardstick {value!r}{did_you_mean(value, YARDSTICKS)}: use {', '.join(YARDSTICKS)}"
            )
        return value


def _no_placeholder(text: str, what: str) -> str:
    found = _PLACEHOLDER.search(text)
    if found:
        raise ValueError(
            f"{what} may not hold the placeholder {found.group(0)!r}: the judge sees the rubric's inputs as data "
            "after the criteria (choose them with `inputs`)"
        )
    return text


def load_rubric_file(path: str | Path) -> RubricSpec:
    """A rubric in a YAML file of its own (a mapping of RubricSpec's fields); InputError with file and line."""
    record, _ = read_yaml_mapping(
        path,
        missing="rubric file not found",
        not_mapping="a rubric file is a mapping of the rubric's fields (criteria, steps, inputs, scale, ...)",
    )
    return validate_record(record, RubricSpec, path)


# ---- the prompt ------------------------------------------------------------------------------------------


def _default_steps(spec: RubricSpec) -> list[str]:
    """GEval writes the evaluation steps with the judge; a rubric without steps gets these."""
    lo, hi = spec.scale
    shown = ", ".join(_LABELS[n].split(" (")[0].lower() for n in spec.inputs)
    focus = "answer" if "answer" in spec.inputs else _LABELS[spec.inputs[-1]].split(" (")[0].lower()
    return [
        f"Read the criterion, then the material below ({shown}).",
        f"Note each point where the {focus} meets the criterion and each point where it falls short.",
        f"Weigh them and choose the score from {lo} to {hi} that fits best; explain it in one or two sentences.",
    ]


def rubric_prompt(name: str, spec: RubricSpec) -> dict[str, Any]:
    """The judge prompt of rubric `name`, as a plain dict of a judge prompt's fields less its version
    (raglake.judge.prompts.Prompt; the judge layer versions it by its rendered template)."""
    lo, hi = spec.scale
    steps = spec.steps or _default_steps(spec)
    material = "\n\n".join(f"{_LABELS[n]}:\n{{{{{n}}}}}" for n in spec.inputs)
    user = (
        f"Evaluate the material below against this criterion:\n{spec.criteria}\n\n"
        "Evaluation steps:\n"
        + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start=1))
        + f"\n\nScore on an integer scale from {lo} to {hi}: {hi} = the criterion is fully met, "
        f"{lo} = it is not met at all.\n\n{material}\n\n"
        f'Reply with JSON: {{"reasoning": "...", "score": {lo}-{hi}}}\n'
    )
    system = (
        "You are a careful evaluator of a retrieval-augmented question-answering system. You judge the material "
        f"you are given against one criterion, following the evaluation steps, and give an integer score from {lo} "
        f"to {hi} with your reasoning.\n"
    )
    return {
        "id": STEP_PREFIX + name,
        "description": f"rubric {name}: {_first_line(spec.description or spec.criteria, 200)}",
        "variables": [{"name": n, "kind": "data"} for n in spec.inputs],
        "system": system,
        "user": user,
        "output_schema": {
            "type": "object",
            "properties": {
                "reasoning": {"type": "string"},
                "score": {"type": "integer", "minimum": lo, "maximum": hi},
            },
            "required": ["reasoning", "score"],
        },
        "max_tokens": MAX_TOKENS,
    }


def _first_line(text: str, limit: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def rubric_step(name: str, spec: RubricSpec) -> JudgeStep:
    """The judge step of rubric `name` (not registered): one call of its own prompt. The spot-check puts
    its score on a 0-5 view: factor 5 / (hi - lo)."""
    lo, hi = spec.scale
    return defined_step(STEP_PREFIX + name, rubric_prompt(name, spec), tuple(spec.inputs), spot_check=5 / (hi - lo))


# ---- the metrics ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RubricScore:
    """A rubric metric's function (a module-level callable: the Metric pickles whole): the judge's score,
    or with `threshold` whether it passes (1/0)."""

    step: JudgeStep
    threshold: float | None = None
    higher_is_better: bool = True

    def __call__(self, ctx: CaseContext) -> Score:
        return from_step(ctx, self.step, self.value)

    def value(self, data: dict[str, Any]) -> float:
        score = float(data["score"])
        if self.threshold is None:
            return score
        return float(score >= self.threshold if self.higher_is_better else score <= self.threshold)


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()[:8]


def rubric_metrics(name: str, spec: RubricSpec, source: str | None = None) -> list[Metric]:
    """The metric(s) of rubric `name`: NAME, and NAME_pass when it has a threshold (not registered)."""
    step = rubric_step(name, spec)
    lo, hi = spec.scale
    yardsticks = (spec.yardstick,) if spec.yardstick else ()
    common = dict(family="judge", level="case", seed="", steps=(step,), origin="rubric", source=source)
    about = _first_line(spec.description or spec.criteria, 160)
    asked = {k: v for k, v in (step.own_prompt or {}).items() if k != "description"}  # what the judge is sent
    out = [
        Metric(
            name,
            version=f"{RUBRIC_VERSION}+{_hash(asked)}",
            scale=f"{lo}-{hi}",
            higher_is_better=spec.higher_is_better,
            description=f"{lo}-{hi}: {about}",
            fn=RubricScore(step),
            yardsticks=yardsticks,
            **common,
        )
    ]
    if spec.threshold is not None:
        rule = ">=" if spec.higher_is_better else "<="
        out.append(
            Metric(
                name + PASS_SUFFIX,
                version=f"{RUBRIC_VERSION}+{_hash(asked, spec.threshold, spec.higher_is_better)}",
                scale="binary",
                higher_is_better=True,
                description=f"1 if {name} {rule} {spec.threshold:g}: {about}",
                fn=RubricScore(step, spec.threshold, spec.higher_is_better),
                yardsticks=yardsticks,
                **common,
            )
        )
    return out


def register_rubrics(specs: Mapping[str, RubricSpec], source: str | None = None) -> list[str]:
    """Register every rubric's metric(s) and judge step (again: the same definitions replace themselves);
    the names of the metrics, in order. ConfigError for a bad name or a clash (a built-in metric's name,
    another metric of the eval file, or NAME_pass of another rubric)."""
    where = f" ({source})" if source else ""
    metrics: list[Metric] = []
    for name, spec in specs.items():
        if not NAME_PATTERN.match(name):
            raise ConfigError(
                f"rubric {name!r}{where}: a rubric's name is lower case letters, digits and _, starting with a "
                "letter (at most 60 characters)"
            )
        metrics += rubric_metrics(name, spec, source)
    names = [m.name for m in metrics]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(
            f"rubric metric {twice[0]!r}{where} is defined twice: a rubric {twice[0]!r} and the pass metric of "
            f"rubric {twice[0].removesuffix(PASS_SUFFIX)!r}; rename one"
        )
    for m in metrics:
        add_metric(m)
        add_step(m.steps[0])
    return names
