"""The eval file (`raglake.yaml`): one evaluation described in a file that lives in git beside the golden set.
Its keys are RunSettings' fields by name (each default is declared there, once), plus what only a file holds:
several targets, metric families, the user's plugins, rubrics and assertions, slices and gate rules. Every
problem is an InputError naming the file, the line and the key, with "did you mean"."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic.fields import FieldInfo

from raglake.errors import InputError, did_you_mean
from raglake.gate import GateRules
from raglake.metrics.extensions import Extensions
from raglake.metrics.registry import FAMILIES
from raglake.metrics.variants import metric_entry
from raglake.pipeline.settings import RunSettings
from raglake.records import read_yaml_mapping

EVAL_FILE = "raglake.yaml"  # looked for in the working folder when no -c FILE is given
# RunSettings fields a file does not set: the target is `targets`, a run id names one run (an option), and the
# extensions and provenance are made from the file itself
NOT_IN_FILE = ("target", "run_id", "extensions", "config_file", "config_sha256", "about")
# keys whose values are paths, resolved against the eval file's folder (a URL is kept as it is)
PATH_KEYS = ("golden", "labels", "lake", "results")


class _FileOnly(BaseModel):
    """The keys only an eval file has (the others are RunSettings' own fields)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Optional[str] = Field(None, description="a name for this evaluation (recorded with its runs)")
    description: Optional[str] = Field(None, description="what this evaluation is for (recorded with its runs)")
    targets: Optional[list[str]] = Field(
        None,
        min_length=1,
        description="the systems to evaluate, each builtin[:CORPUS_DIR], http:CONFIG.yaml, replay:FILE or "
        "replay-run:RUN_ID (paths relative to this file); several are compared with each other",
    )
    target: Optional[str] = Field(None, description="one target (the same as a one-item `targets` list)")
    families: Optional[list[str]] = Field(
        None, description=f"every metric of these families ({', '.join(FAMILIES)}), besides `metrics`"
    )
    plugins: Optional[Extensions.model_fields["plugins"].annotation] = Field(  # type: ignore[name-defined]
        None, description=Extensions.model_fields["plugins"].description
    )
    rubrics: Optional[Extensions.model_fields["rubrics"].annotation] = Field(  # type: ignore[name-defined]
        None, description=Extensions.model_fields["rubrics"].description
    )
    assertions: Optional[Extensions.model_fields["assertions"].annotation] = Field(  # type: ignore[name-defined]
        None, description=Extensions.model_fields["assertions"].description
    )
    gate: Optional[GateRules] = Field(
        None, description="the regression gate's rules (`raglake gate` reads them when no --rules is given)"
    )

    @field_validator("families")
    @classmethod
    def _families(cls, value: list[str] | None) -> list[str] | None:
        for name in value or []:
            if name not in FAMILIES:
                raise ValueError(
                    f"unknown metric family {name!r}{did_you_mean(name, FAMILIES)}; one of {', '.join(FAMILIES)}"
                )
        return value

    @field_validator("metrics", mode="before", check_fields=False)
    @classmethod
    def _metric_entries(cls, value: Any) -> Any:
        return [metric_entry(v) for v in value] if isinstance(value, list) else value



def _optional(name: str, info: FieldInfo) -> tuple[Any, FieldInfo]:
    """A RunSettings field as an eval-file key: the same type and checks, absent when not given. Metric names
    are checked once the file's own metrics are registered (raglake.config.front), each at its own line."""
    if name == "metrics":
        return Optional[list[str]], Field(None, description=info.description)
    copied = copy.copy(info)
    copied.default, copied.default_factory = None, None
    return Optional[info.annotation], copied


EvalFileModel: type[BaseModel] = create_model(
    "EvalFile",
    __base__=_FileOnly,
    __doc__="raglake's eval file (raglake.yaml): one evaluation, its targets, metrics, judge and checks.",
    **{name: _optional(name, info) for name, info in RunSettings.model_fields.items() if name not in NOT_IN_FILE},
)
EXTENSION_KEYS = ("plugins", "rubrics", "assertions")


@dataclass
class EvalFile:
    """A loaded eval file: its path, sha256, the values it gives (paths resolved against its folder) and the
    line of each key (for messages about values that fail only once merged with the command line's)."""

    path: Path
    sha256: str
    values: dict[str, Any]
    node: Any = field(repr=False, default=None)

    @property
    def folder(self) -> Path:
        return self.path.parent

    def line(self, loc: tuple[Any, ...]) -> int | None:
        return line_of(self.node, loc)

    def extensions(self) -> Extensions:
        """Its plugins, rubrics and assertions (a rubric file read relative to the eval file)."""
        given = {k: self.values[k] for k in EXTENSION_KEYS if self.values.get(k) is not None}
        return Extensions.model_validate(
            {"source": str(self.path), "base_dir": str(self.folder), **given}, context={"base_dir": str(self.folder)}
        )


def find_eval_file(explicit: str | Path | None, folder: str | Path | None = None) -> Path | None:
    """`-c FILE` when given (it must exist), else raglake.yaml in the working folder when there is one."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise InputError(str(path), None, None, "eval file not found" if not path.exists() else "is not a file")
        return path
    found = Path(folder or Path.cwd()) / EVAL_FILE
    return found if found.is_file() else None


def load_eval_file(path: str | Path) -> EvalFile:
    """Read and check an eval file: every key known, every value of its type (InputError with file and line)."""
    path = Path(path).resolve()
    record, node = read_yaml_mapping(
        path,
        missing="eval file not found",
        not_mapping="an eval file is a YAML mapping of settings (golden:, targets:, metrics:, …); see `raglake init`",
    )
    data = dict(record.data)
    _validate(path, data, node, path.parent)
    values = resolve_paths(data, path.parent)
    return EvalFile(path, hashlib.sha256(path.read_bytes()).hexdigest(), values, node)


def _validate(path: Path, data: dict[str, Any], node: Any, folder: Path) -> None:
    try:  # base_dir: a rubric given as a file name is read relative to the eval file
        EvalFileModel.model_validate(data, context={"base_dir": str(folder)})
    except ValidationError as e:
        raise _input_error(path, node, e) from None
    if data.get("target") is not None and data.get("targets") is not None:
        raise InputError(str(path), line_of(node, ("target",)), "target", "give `target` or `targets`, not both")


def _input_error(path: Path, node: Any, e: ValidationError) -> InputError:
    """The first error of a validation as file, line, key and message (unknown keys with "did you mean")."""
    err = e.errors()[0]
    loc = tuple(err["loc"])
    key = ".".join(str(p) for p in loc) or None
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = f"unknown key{did_you_mean(str(loc[-1]), _known_keys(loc))}"
    elif err["type"] == "missing":
        message = "required key is missing"
    elif "input" in err and err["type"] != "value_error" and not isinstance(err["input"], (dict, list)):
        message += f" (got {err['input']!r})"
    more = len(e.errors()) - 1
    if more:
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return InputError(str(path), line_of(node, loc), key, message)


def _known_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys valid beside the last one of `loc` (top level, or inside a nested settings model)."""
    model: Any = EvalFileModel
    for part in loc[:-1]:
        info = getattr(model, "model_fields", {}).get(part) if not isinstance(part, int) else None
        if info is None:
            return []
        model = _model_in(info.annotation)
    return list(getattr(model, "model_fields", {}))


def _model_in(annotation: Any) -> Any:
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the key (or list item) at `loc` in a YAML node tree; the deepest one found."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(
                ((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None
            )
            if match is None:
                continue  # not a key of the file: a union's tag in the location (`regex` of an assertion)
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    if line is None and node is not None and loc:
        return 1
    return line


def resolve_paths(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The values with the file's relative paths made absolute (against its folder)."""
    out = dict(data)
    for key in PATH_KEYS:
        if isinstance(out.get(key), str):
            out[key] = _path(out[key], folder)
    embedder = out.get("embedder")
    if isinstance(embedder, str) and not Path(embedder).is_absolute() and (folder / embedder).exists():
        out["embedder"] = str(folder / embedder)  # a model folder beside the file; else a name, as given
    for key in ("targets", "target"):
        if isinstance(out.get(key), list):
            out[key] = [target_path(t, folder) for t in out[key]]
        elif isinstance(out.get(key), str):
            out[key] = target_path(out[key], folder)
    return out


def _path(value: str, folder: Path) -> str:
    return value if "://" in value or Path(value).is_absolute() else str(folder / value)


def target_path(spec: Any, folder: Path) -> Any:
    """`replay:captures.jsonl` -> `replay:<folder>/captures.jsonl` (builtin, http and replay name files)."""
    if not isinstance(spec, str):
        return spec
    kind, sep, arg = spec.partition(":")
    if kind in ("replay", "http", "builtin") and sep and arg and "://" not in arg and not Path(arg).is_absolute():
        query = ""
        if "?" in arg:
            arg, query = arg.split("?", 1)
            query = "?" + query
        return f"{kind}:{folder / arg}{query}"
    return spec


def schema() -> dict[str, Any]:
    """The eval file's JSON Schema (`raglake config schema`): editors complete and check the file from it."""
    out = EvalFileModel.model_json_schema()
    judge = out["properties"]["judge"]
    judge["anyOf"] = [*judge["anyOf"], {"const": "local", "description": "the bundled local judge"}]
    out["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    out["title"] = "raglake eval file (raglake.yaml)"
    return out
