"""The one front door: an eval file (or a mapping) plus the overrides of the command line, the Python API or a
deployment, resolved into one RunSettings per target. Every default is RunSettings' own; the overrides are
named by its fields (a leaf as `judge.model` or by its option's parameter name, `judge_model`)."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raglake.config.defaults import default_target, golden_notes
from raglake.config.evalfile import (
    EXTENSION_KEYS,
    EvalFile,
    EvalFileModel,
    find_eval_file,
    line_of,
    load_eval_file,
    resolve_paths,
)
from raglake.errors import ConfigError, InputError, did_you_mean
from raglake.gate import GateRules, load_rules, unknown_metric
from raglake.metrics.extensions import Extensions
from raglake.metrics.registry import default_metrics, select_metrics
from raglake.metrics.variants import metric_entry
from raglake.pipeline.fields import leaf_fields, set_path
from raglake.pipeline.judge_settings import JudgeSettings
from raglake.pipeline.settings import RunSettings, describe


@dataclass
class Evaluation:
    """What the front door resolved: the runs (one per target), the eval file they came from, its gate rules."""

    runs: list[RunSettings]
    file: EvalFile | None = None
    gate: GateRules | None = None
    notes: list[str] = field(default_factory=list)  # what the user gave that the runs do not use, said before them


def override_names() -> dict[str, str]:
    """Every name an override may use -> the field path it sets: leaf paths (`judge.model`), their option's
    parameter names (`judge_model`, `theta_s`), the top-level fields (`judge` replaces the whole judge) and the
    eval file's own keys (`targets`, `families`, …)."""
    names: dict[str, str] = {}
    for f in leaf_fields(RunSettings):
        names[f.path] = names[f.param] = f.path
    for key in EvalFileModel.model_fields:
        names.setdefault(key, key)
    for key in RunSettings.model_fields:
        names.setdefault(key, key)
    return names


def resolve(
    config: str | Path | Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    folder: str | Path | None = None,
    discover: bool = True,
) -> Evaluation:
    """The runs an evaluation asks for. `config`: an eval file's path, its content as a mapping, or None (then
    raglake.yaml in `folder`, the working folder by default, when `discover` and there is one). `overrides`:
    values by name (None: not given) that win over the file's."""
    file = _file(config, folder, discover)
    given = _overrides(overrides or {})
    values = merged(file.values if file else {}, given)
    named = values.pop("targets", None) or ([values.pop("target")] if values.get("target") else None)
    values.pop("target", None)
    targets = named or [default_target(values.get("golden"))]
    about = {k: values.pop(k) for k in ("name", "description") if values.get(k) is not None}
    values.pop("name", None), values.pop("description", None)
    gate = values.pop("gate", None)
    families = values.pop("families", None)
    ext_values = {k: values.pop(k) for k in EXTENSION_KEYS if values.get(k) is not None}
    for key in EXTENSION_KEYS:
        values.pop(key, None)
    extensions = _extensions(file, ext_values)
    own = extensions.activate()
    _check_metric_names(values.get("metrics"), own, file, "metrics" in given)
    if families and "metrics" not in given:  # metrics named by an option or the API: only those
        chosen = values.get("metrics") or []
        values["metrics"] = list(
            dict.fromkeys([*chosen, *(m.name for m in default_metrics(extra=own) if m.family in families)])
        )
    if values.get("run_id") and len(targets) > 1:
        raise ConfigError("--run-id names one run; give a single target with it")
    provenance = {"config_file": str(file.path), "config_sha256": file.sha256, "about": about or None} if file else {}
    runs = [_run(values, target, extensions, provenance, file, given) for target in targets]
    notes = golden_notes(values.get("golden"), named)
    return Evaluation(runs, file, _checked_gate(gate, file) if gate is not None else None, notes)


def merged(values: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The eval file's values with the overrides (by field path) applied: whole objects first, then leaves, so a
    leaf given beside its object wins; a judge given as `local` is `{local: true}`, an override's `judge.local`
    (`--judge local`) replaces the file's judge, and a base_url given for the file's local judge makes it a remote
    one; `target` and `targets` replace each other."""
    out = copy.deepcopy(dict(values))
    if "judge" in out:
        out["judge"] = JudgeSettings.of(out["judge"])
    for path, value in sorted(given.items(), key=lambda item: item[0].count(".")):
        if path == "judge.local" and value:
            out["judge"] = {"local": True}
            continue
        judge = out.get("judge")
        if path == "judge.base_url" and isinstance(judge, dict) and judge.get("local"):
            out["judge"] = {k: v for k, v in judge.items() if k != "local"}
        set_path(out, path, JudgeSettings.of(value) if path == "judge" else value)
        if path in ("target", "targets"):
            out.pop("targets" if path == "target" else "target", None)
    return out


def _check_metric_names(names: Any, own: list[str], file: EvalFile | None, overridden: bool) -> None:
    """An unknown metric name of the eval file is an InputError at its own line (with "did you mean")."""
    if file is None or file.node is None or overridden or not isinstance(names, list):
        return
    for i, name in enumerate(names):
        try:
            select_metrics([metric_entry(name)], extra=own)
        except (ConfigError, ValueError) as e:
            raise InputError(str(file.path), line_of(file.node, ("metrics", i)), f"metrics[{i}]", str(e)) from None


def _file(config: Any, folder: Any, discover: bool) -> EvalFile | None:
    if config is not None and not isinstance(config, (str, Path, Mapping)):
        raise ConfigError(f"config takes an eval file's path or its content as a mapping, got {type(config).__name__}")
    if isinstance(config, Mapping):
        return _mapping(config, Path(folder or Path.cwd()))
    path = find_eval_file(config, folder) if (config is not None or discover) else None
    return load_eval_file(path) if path is not None else None


def _mapping(config: Mapping[str, Any], folder: Path) -> EvalFile:
    """An eval file given as a mapping (the API's `config={...}`): checked as a file is, paths relative to `folder`."""
    data = dict(config)
    try:
        EvalFileModel.model_validate(data, context={"base_dir": str(folder)})
    except ValidationError as e:
        raise ConfigError("config: " + describe(EvalFileModel, e.errors()[0])) from None
    # recorded as the run's eval file: what the mapping was, and the sha256 of its canonical JSON
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()
    return EvalFile(folder / "(a mapping given as config)", digest, resolve_paths(data, folder), None)


def _overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The given overrides (None: not given) by field path; an unknown name is a ConfigError with a suggestion."""
    names = override_names()
    out = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name not in names:
            raise ConfigError(f"unknown setting {name!r}{did_you_mean(name, names)}")
        out[names[name]] = value
    return out


def _extensions(file: EvalFile | None, values: dict[str, Any]) -> Extensions:
    source, base = (str(file.path), str(file.folder)) if file else (None, str(Path.cwd()))
    try:
        return Extensions.model_validate({"source": source, "base_dir": base, **values}, context={"base_dir": base})
    except ValidationError as e:
        raise ConfigError(describe(Extensions, e.errors()[0])) from None


def _run(
    values: dict[str, Any],
    target: str,
    extensions: Extensions,
    provenance: dict[str, str],
    file: EvalFile | None,
    given: dict[str, Any],
) -> RunSettings:
    """One run's settings; a bad value names its option when the command line gave it, else the file's line."""
    try:
        return RunSettings(**values, target=target, extensions=extensions, **provenance)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        path = ".".join(str(p) for p in loc)
        from_file = (
            file is not None
            and file.node is not None
            and not any(path == g or path.startswith(g + ".") or g.startswith(path + ".") for g in given)
        )
        if from_file and loc:
            message = describe(RunSettings, err).split(": ", 1)[-1]
            raise InputError(str(file.path), line_of(file.node, loc), path, message) from None
        raise ConfigError(describe(RunSettings, err)) from None


def settings_for(
    model: type[Any], config: str | Path | None, overrides: Mapping[str, Any], keys: tuple[str, ...]
) -> Any:
    """A settings model of another command (a re-scoring, a meta-evaluation) from the eval file's `keys` (its
    lake, judge, embedder, …) and its own metrics, with `overrides` by field path winning; no eval file here:
    the overrides alone. A bad value is a ConfigError naming its option."""
    file = _file(config, None, True)
    values: dict[str, Any] = {}
    if file is not None:
        values = {k: file.values[k] for k in keys if file.values.get(k) is not None}
    values = merged(values, {path: v for path, v in overrides.items() if v is not None})
    if file is not None:
        values["extensions"] = file.extensions()
    try:
        return model(**values)
    except ValidationError as e:
        raise ConfigError(describe(model, e.errors()[0])) from None


def gate_rules(config: str | Path | None, rules: str | Path | None) -> tuple[GateRules, str | None]:
    """The gate's rules (a --rules file, else the eval file's `gate:`) and the eval file's lake, with the eval
    file's own metrics registered so that a rule may gate them."""
    file = _file(config, None, True)
    if file is not None:
        file.extensions().activate()
    lake = file.values.get("lake") if file is not None else None
    if rules is not None:
        return load_rules(rules), lake
    if file is None or file.values.get("gate") is None:
        raise ConfigError(
            "no gate rules: give --rules FILE, or a `gate:` section in the eval file (raglake.yaml or -c)"
        )
    return _checked_gate(file.values["gate"], file), lake


def _checked_gate(gate: Any, file: EvalFile | None) -> GateRules:
    """The eval file's gate rules, each metric pattern naming a registered metric (InputError at its line)."""
    rules = GateRules.model_validate(gate) if not isinstance(gate, GateRules) else gate
    unknown = unknown_metric(rules)
    if unknown is not None:
        i, message = unknown
        where = (str(file.path), line_of(file.node, ("gate", "rules", i, "metric"))) if file else ("gate", None)
        raise InputError(*where, f"gate.rules[{i}].metric", message)
    return rules
