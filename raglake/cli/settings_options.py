"""Command-line options made from the settings models' fields: `--judge-base-url` is the field
`judge.base_url`, with its help and default from the field (raglake.pipeline.fields). Every option defaults to
"not given" (None), so that only what the user typed overrides the eval file, and the model's own defaults
apply once."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Optional

import typer
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from raglake.pipeline.fields import SettingsField, leaf_fields

_PLAIN = (str, int, float, bool)


def _inner(annotation: Any) -> Any:
    """The type inside Optional[...] (and Annotated[...])."""
    if typing.get_origin(annotation) is Annotated:
        return _inner(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _inner(args[0]) if len(args) == 1 else str
    return annotation


def option_type(f: SettingsField) -> Any:
    """The Python type of the option: a plain type, or a list of strings for a list field (repeatable)."""
    inner = _inner(f.annotation)
    if typing.get_origin(inner) is list:
        return list[str]
    return inner if inner in _PLAIN else str


def _default_text(f: SettingsField) -> str:
    """' (default: 5)' for a short default the help does not state already."""
    default = f.info.default
    if default is PydanticUndefined or default is None or isinstance(default, bool) or "default" in f.help:
        return ""
    shown = str(default)
    return f" (default: {shown})" if len(shown) <= 24 else ""


def _parameter(f: SettingsField) -> inspect.Parameter:
    kind = option_type(f)
    names = list(f.options)
    if kind is bool:  # a switch: --x/--no-x (an alias switches it on)
        names = [f"{f.option}/--no-{f.option.removeprefix('--')}", *f.cli.aliases]
    info = typer.Option(*names, help=f.help + _default_text(f), show_default=False, rich_help_panel=_panel(f))
    annotation = Annotated[Optional[kind], info]  # type: ignore[valid-type]
    return inspect.Parameter(f.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)


def _panel(f: SettingsField) -> str | None:
    head = f.path.split(".", 1)[0]
    return {"judge": "Judge", "spot_check": "Spot-check", "scoring": "Scoring"}.get(head)


def settings_fields(model: type[BaseModel], skip: tuple[str, ...] = ()) -> list[SettingsField]:
    """The model's fields that are options (not hidden, not in `skip`)."""
    return [f for f in leaf_fields(model) if not f.cli.hidden and f.path not in skip]


def with_settings_options(
    model: type[BaseModel], skip: tuple[str, ...] = ()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the command also takes an option per field of `model` (those not in `skip`); the command
    receives them as one dict `settings` {field path: value or None} instead of one argument each."""
    fields = settings_fields(model, skip)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)  # the command module's names, evaluated there
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own.parameters.values()]
        params = [p for p in params if p.name != "settings"]
        taken = {p.name for p in params}
        clash = [f.param for f in fields if f.param in taken]
        if clash:
            raise ValueError(f"options {clash} are both the command's own and settings fields")

        def command(**kwargs: Any) -> Any:
            settings = {f.path: kwargs.pop(f.param) for f in fields}
            return fn(**kwargs, settings=settings)

        signature = own.replace(parameters=[*params, *(_parameter(f) for f in fields)], return_annotation=None)
        command.__signature__ = signature  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in command.__signature__.parameters.values()}  # type: ignore[attr-defined]
        command.__name__, command.__doc__, command.__module__ = fn.__name__, fn.__doc__, fn.__module__
        return command

    return wrap
