"""The regression gate: candidate run against a baseline, metric by metric and slice by slice; a row
fails when the metric moved the wrong way by more than its rule allows AND the paired bootstrap CI
excludes zero (a real drop, not noise)."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raglake.analysis import COMPARE_DIMENSIONS, LakeQueries
from raglake.errors import InputError, did_you_mean
from raglake.metrics.registry import all_metrics
from raglake.records import read_yaml_mapping, validate_record


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metric: str  # a metric name or a glob ("label_*")
    max_drop: float | None = Field(default=None, ge=0)  # allowed move in the bad direction, in the metric's units
    dimensions: list[str] | None = None
    min_pairs: int | None = Field(default=None, ge=1)
    ignore: bool = False

    @field_validator("dimensions")
    @classmethod
    def _dims(cls, v: list[str] | None) -> list[str] | None:
        for d in v or []:
            if d not in COMPARE_DIMENSIONS:
                raise ValueError(
                    f"unknown dimension {d!r}{did_you_mean(d, COMPARE_DIMENSIONS)}; "
                    f"one of {', '.join(COMPARE_DIMENSIONS)}"
                )
        return v


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_drop: float = Field(default=0.0, ge=0)
    dimensions: list[str] = ["all"]
    min_pairs: int = Field(default=5, ge=1)


class GateRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    defaults: Defaults = Defaults()
    rules: list[Rule] = Field(min_length=1)


def load_rules(path: str | Path) -> GateRules:
    """A gate.yaml; every metric pattern must name a registered metric (with a suggestion if not)."""
    path = Path(path)
    record, node = read_yaml_mapping(
        path,
        missing="gate rules file not found",
        not_mapping="expected a mapping with `rules:` (and optional `defaults:`)",
    )
    rules = validate_record(record, GateRules, path)
    names = [m.name for m in all_metrics(level="case")]
    rule_nodes = next((v for k, v in node.value if k.value == "rules"), None)
    for i, rule in enumerate(rules.rules):
        if not fnmatch.filter(names, rule.metric):
            line = rule_nodes.value[i].start_mark.line + 1 if rule_nodes is not None else None
            raise InputError(
                str(path),
                line,
                f"rules[{i}].metric",
                f"{rule.metric!r} matches no case-level metric{did_you_mean(rule.metric, names)}",
            )
    return rules


def effective_rule(rules: GateRules, metric: str) -> dict[str, Any] | None:
    """The last matching rule wins (so a broad pattern can be refined below it); None: not gated."""
    chosen = None
    for rule in rules.rules:
        if fnmatch.fnmatch(metric, rule.metric):
            chosen = rule
    if chosen is None or chosen.ignore:
        return None
    d = rules.defaults
    return {
        "max_drop": d.max_drop if chosen.max_drop is None else chosen.max_drop,
        "dimensions": chosen.dimensions or d.dimensions,
        "min_pairs": chosen.min_pairs or d.min_pairs,
    }


def evaluate_gate(
    q: LakeQueries, baseline: str, candidate: str, rules: GateRules, n_boot: int = 1000, seed: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(checked rows, failing rows) of the comparison, each with the rule applied."""
    min_pairs = min([r.min_pairs for r in rules.rules if r.min_pairs] + [rules.defaults.min_pairs])
    rows = q.compare(baseline, candidate, n_boot=n_boot, seed=seed, min_pairs=min_pairs)
    checked, failing = [], []
    for row in rows:
        rule = effective_rule(rules, row["metric"])
        if rule is None or row["dimension"] not in rule["dimensions"] or row["higher_is_better"] is None:
            continue
        drop = -row["diff"] if row["higher_is_better"] else row["diff"]
        real = row["n_pairs"] >= rule["min_pairs"] and (
            row["ci_high"] < 0 if row["higher_is_better"] else row["ci_low"] > 0
        )
        row = {**row, "drop": drop, "max_drop": rule["max_drop"], "fails": bool(real and drop > rule["max_drop"])}
        checked.append(row)
        if row["fails"]:
            failing.append(row)
    return checked, failing
