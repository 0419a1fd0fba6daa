"""The regression gate: candidate run against a baseline, metric by metric and slice by slice; a row
fails when the metric moved the wrong way by more than its rule allows AND the difference is real:
Benjamini-Hochberg at the rules' `fdr` level across the gate's own checks (the metric × slice rows its
rules gate), or, with `fdr: off`, the per-slice 95% interval excludes zero."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raglake.analysis import COMPARE_DIMENSIONS, DEFAULT_FDR, META_DIMENSION, LakeQueries, parse_fdr
from raglake.errors import ConfigError, InputError, did_you_mean
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
            if d not in COMPARE_DIMENSIONS and not META_DIMENSION.fullmatch(d):
                raise ValueError(
                    f"unknown dimension {d!r}{did_you_mean(d, COMPARE_DIMENSIONS)}; "
                    f"one of {', '.join(COMPARE_DIMENSIONS)}, or meta.KEY for a key of the eval file's slices"
                )
        return v


class Defaults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_drop: float = Field(default=0.0, ge=0)
    dimensions: list[str] = ["all"]
    min_pairs: int = Field(default=5, ge=1)


class GateRules(BaseModel):
    model_config = ConfigDict(extra="forbid")
    # Benjamini-Hochberg level of the verdicts across the gate's checks; off: the per-slice intervals
    fdr: float | None = DEFAULT_FDR
    defaults: Defaults = Defaults()
    rules: list[Rule] = Field(min_length=1)

    @field_validator("fdr", mode="before")
    @classmethod
    def _fdr(cls, v: object) -> float | None:
        try:
            return parse_fdr(v)
        except ConfigError as e:
            raise ValueError(str(e)) from None


def load_rules(path: str | Path) -> GateRules:
    """A gate.yaml; every metric pattern must name a registered metric (with a suggestion if not)."""
    path = Path(path)
    record, node = read_yaml_mapping(
        path,
        missing="gate rules file not found",
        not_mapping="expected a mapping with `rules:` (and optional `defaults:`)",
    )
    rules = validate_record(record, GateRules, path)
    unknown = unknown_metric(rules)
    if unknown is not None:
        i, message = unknown
        rule_nodes = next((v for k, v in node.value if k.value == "rules"), None)
        line = rule_nodes.value[i].start_mark.line + 1 if rule_nodes is not None else None
        raise InputError(str(path), line, f"rules[{i}].metric", message)
    return rules


def unknown_metric(rules: GateRules) -> tuple[int, str] | None:
    """The first rule whose metric pattern names no case-level metric of the registry (the user's metrics of
    the eval file included, once registered): its index and what is wrong; None when every rule names one."""
    names = [m.name for m in all_metrics(level="case")]
    for i, rule in enumerate(rules.rules):
        if not fnmatch.filter(names, rule.metric):
            return i, f"{rule.metric!r} matches no case-level metric{did_you_mean(rule.metric, names)}"
    return None


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


def gate_tests(rules: GateRules, metrics: list[str]) -> list[dict[str, Any]]:
    """The gate's family of tests: {metric, dimension, min_pairs} of every gated metric and dimension."""
    tests = []
    for metric in metrics:
        rule = effective_rule(rules, metric)
        if rule is not None:
            tests += [{"metric": metric, "dimension": d, "min_pairs": rule["min_pairs"]} for d in rule["dimensions"]]
    return tests


def evaluate_gate(
    q: LakeQueries, baseline: str, candidate: str, rules: GateRules
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(checked rows, failing rows) of the comparison, each with the rule applied. The checks are the
    rows the rules gate (with a direction and at least the rule's min_pairs pairs); a row fails when
    it dropped by more than max_drop and its verdict is a regression: Benjamini-Hochberg at
    `rules.fdr` across the checks (a subset of a larger family would not keep its FDR), or with
    `fdr: off` the per-slice interval."""
    tests = gate_tests(rules, q.scored_metrics([baseline, candidate]))
    rows = q.compare(baseline, candidate, min_pairs=1, fdr=rules.fdr, tests=tests)
    checked, failing = [], []
    for row in rows:
        rule = effective_rule(rules, row["metric"])
        if rule is None or not row["tested"]:  # only the gated rows are tested
            continue
        drop = -row["diff"] if row["higher_is_better"] else row["diff"]
        fails = bool(row["regression"] and drop > rule["max_drop"])
        row = {**row, "drop": drop, "max_drop": rule["max_drop"], "fails": fails}
        checked.append(row)
        if fails:
            failing.append(row)
    return checked, failing


def gate_verdicts(rules: GateRules, n_checks: int) -> str:
    """One line on how the gate decided that a drop is real."""
    if rules.fdr is None:
        return f"verdicts: each of the {n_checks} checks on its own 95% interval (fdr: off, uncorrected)"
    return f"verdicts: Benjamini-Hochberg at a false discovery rate of {rules.fdr:g} across the {n_checks} checks"


# what `raglake gate` prints of a failing row
FAILING_COLUMNS = (
    "metric",
    "dimension",
    "slice",
    "n_pairs",
    "mean_a",
    "mean_b",
    "drop",
    "max_drop",
    "ci_low",
    "ci_high",
    "q_value",
)


def failing_rows(failing: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in FAILING_COLUMNS} for r in failing]
