"""The settings models' fields as the command line, the eval file and the Python API name them: one walk over
the models, so that an option's name, help, default and type come from the field that declares them (no
table of option names to keep in step)."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Cli:
    """How a settings field appears on the command line. `aliases`: shorter spellings kept beside the name
    made from the field (`--judge-rpm` for `--judge-requests-per-minute`); `hidden`: not an option (a file or
    API field only, e.g. mappings of weights); `flatten` (on a nested model): its fields are options without
    the model's prefix (`--theta-s`, not `--scoring-theta-s`); `short`: a one-letter flag."""

    aliases: tuple[str, ...] = ()
    hidden: bool = False
    flatten: bool = False
    short: str | None = None


@dataclass(frozen=True)
class SettingsField:
    """One leaf field: its path in the model (`judge.model`), the nested models above it, its FieldInfo."""

    path: str
    info: FieldInfo
    annotation: Any
    cli: Cli
    prefix: str  # the option prefix from the nested models above it ("judge-", "spot-check-", "")

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def option(self) -> str:
        """`--judge-base-url` for judge.base_url; `--k` for k."""
        return "--" + self.prefix + self.name.replace("_", "-")

    @property
    def options(self) -> tuple[str, ...]:
        return (self.option, *self.cli.aliases, *((self.cli.short,) if self.cli.short else ()))

    @property
    def param(self) -> str:
        """The Python name of the option's parameter (unique over the model)."""
        return self.option.removeprefix("--").replace("-", "_")

    @property
    def help(self) -> str:
        text = (self.info.description or "").strip()
        return text[:1].upper() + text[1:] + ("" if text.endswith(".") or not text else ".")


def cli_of(info: FieldInfo) -> Cli:
    return next((m for m in info.metadata if isinstance(m, Cli)), Cli())


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The model inside `Model | None` (or `Model`), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return nested_model(inner[0])
    return None


def leaf_fields(model: type[BaseModel], path: str = "", prefix: str = "") -> Iterator[SettingsField]:
    """Every leaf field of `model` and its nested settings models, depth first, in declaration order."""
    for name, info in model.model_fields.items():
        cli = cli_of(info)
        inner = nested_model(info.annotation)
        full = f"{path}{name}"
        if inner is not None and not cli.hidden:
            below = prefix if cli.flatten else f"{prefix}{name.replace('_', '-')}-"
            yield from leaf_fields(inner, f"{full}.", below)
        else:
            yield SettingsField(full, info, info.annotation, cli, prefix)


def option_name(model: type[BaseModel], path: str) -> str:
    """The command-line spelling of a field path (`judge.timeout_s` -> `--judge-timeout-s`), or the path."""
    for f in leaf_fields(model):
        if f.path == path and not f.cli.hidden:
            return f.option
    return path


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """data[a][b] = value for path `a.b` (the nested mappings are made as needed)."""
    *parents, leaf = path.split(".")
    for part in parents:
        child = data.get(part)
        if not isinstance(child, dict):
            child = {} if child is None or isinstance(child, (str, bool)) else dict(child)
            data[part] = child
        data = child
    data[leaf] = value
