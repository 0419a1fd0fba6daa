"""`@raglake.metric(...)`: a user's own metric in Python, a pure function of the case (raglake.metrics.custom.Case).

A decorated function is registered through `registry.add_metric` (origin `plugin` or `entry_point`, source
"file.py:line") as a case-level metric whose `fn` is a raglake.metrics.custom.UserFunction. Its version is
`f"{version}+{hash}"`, the hash over the function's source (and the same module's functions, classes and
constants it names), so that an edit makes `raglake rescore` recompute exactly that metric. While
raglake.metrics.plugins imports a plugin or an entry point, the decorators register as that module
(`loading`); anywhere else (a notebook, a test) as a plugin of the function's own file."""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import marshal
import re
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cloudpickle

from raglake.errors import ConfigError, UnknownNameError
from raglake.metrics.custom import INPUTS, SCALES_HELP, UserFunction, scale_range
from raglake.metrics.registry import APPLIES_TO, FAMILIES, Metric, add_metric, get_metric, remove_metric

NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")  # the rule every built-in metric's name follows
VERSION = re.compile(r"[A-Za-z0-9._-]{1,32}")
MARK = "__raglake_metric__"  # set on a decorated function: the name of its metric
_CONSTANTS = (int, float, str, bytes, bool, type(None))


@dataclass
class Loading:
    """One module being imported by load_plugins or load_entry_points: what its decorators register."""

    origin: str  # plugin or entry_point
    label: str  # how messages name it: the plugin as written, or the entry point and its package
    claimed: dict[str, str]  # names the other modules of the same call defined -> their source
    file: str | None = None  # a plugin file's absolute path (its frames name it by `label`)
    package: str | None = None  # an entry point's distribution, "name version"
    defined: dict[str, Metric] = field(default_factory=dict)
    replaced: dict[str, Metric | None] = field(default_factory=dict)  # each name's earlier metric (to roll back)

    def source(self, fn: Callable[..., Any]) -> str:
        line = _first_line(fn)
        if self.file is not None and fn.__code__.co_filename == self.file:
            return f"{self.label}:{line}"
        where = f"{file_name(fn)}:{line}"
        return f"{where} ({self.package})" if self.package else where


LOADING: contextvars.ContextVar[Loading | None] = contextvars.ContextVar("raglake_plugin_loading", default=None)


def metric(
    name: str,
    *,
    version: str = "1",
    family: str = "custom",
    higher_is_better: bool | None = True,
    inputs: Sequence[str] = (),
    applies_to: str = "all",
    scale: str = "0-1",
    description: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a pure function of the case (raglake.metrics.custom.Case) as a case-level metric.

    It returns a number (on `scale`), a bool (1/0), None (undefined), `(value, reason)` or a Score; an
    exception is that case's `metric_error`. A case that lacks one of `inputs` (question, answer, contexts,
    reference, metadata, latency, cost) is `undefined` without a call, as is a failed capture and a case
    `applies_to` excludes (all, answerable, unanswerable). `description` defaults to the docstring's first
    line. Bump `version` when the result changes for a reason the code does not show (a model, a file)."""
    declared = _checked(name, version, family, higher_is_better, inputs, applies_to, scale, description)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        _check_function(name, fn)
        doc = (inspect.getdoc(fn) or "").strip().splitlines()
        new = Metric(
            name,
            family,
            f"{version}+{code_hash(fn)}",
            scale,
            higher_is_better,
            "case",
            "",
            description if description is not None else (doc[0] if doc else ""),
            UserFunction(fn, declared, scale),
            applies_to,
            declared,
        )
        _register(new, fn)
        setattr(fn, MARK, name)
        return fn

    return decorate


def _checked(
    name: Any,
    version: Any,
    family: Any,
    higher_is_better: Any,
    inputs: Any,
    applies_to: Any,
    scale: Any,
    description: Any,
) -> tuple[str, ...]:
    """Refuse bad metadata where the decorator is written; the declared inputs, in order, once each."""
    if callable(name):
        raise ConfigError('@raglake.metric takes the metric\'s name first: @raglake.metric("my_metric")')
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(
            f"metric name {name!r}: use 1 to 64 lowercase letters, digits and '_', a letter first "
            f"(as the built-in names do, e.g. 'recall_any_at_k')"
        )
    if isinstance(version, bool) or not isinstance(version, (str, int)) or not VERSION.fullmatch(str(version)):
        raise ConfigError(f"version {version!r} of metric {name!r}: use a short word such as '1' or '2.1'")
    if family not in FAMILIES:
        raise UnknownNameError(f"family of metric {name!r}", str(family), FAMILIES)
    if not (higher_is_better is None or isinstance(higher_is_better, bool)):
        raise ConfigError(f"higher_is_better of metric {name!r} is True, False or None, not {higher_is_better!r}")
    if applies_to not in APPLIES_TO:
        raise UnknownNameError(f"applies_to of metric {name!r}", str(applies_to), APPLIES_TO)
    if not isinstance(scale, str) or scale_range(scale) is None:
        raise ConfigError(f"scale {scale!r} of metric {name!r}: use {SCALES_HELP}")
    if description is not None and not isinstance(description, str):
        raise ConfigError(f"description of metric {name!r} is a string, not {type(description).__name__}")
    names = (inputs,) if isinstance(inputs, str) else tuple(inputs) if isinstance(inputs, (list, tuple)) else None
    if names is None:
        raise ConfigError(f"inputs of metric {name!r} is a list of names (of {', '.join(INPUTS)}), not {inputs!r}")
    for i in names:
        if i not in INPUTS:
            raise UnknownNameError(f"input of metric {name!r}", str(i), INPUTS)
    return tuple(dict.fromkeys(names))


def _check_function(name: str, fn: Any) -> None:
    if not inspect.isfunction(fn):
        raise ConfigError(f"@raglake.metric({name!r}) decorates a function (def ...(case):), not {fn!r}")
    if inspect.iscoroutinefunction(fn) or inspect.isgeneratorfunction(fn):
        raise ConfigError(f"metric {name!r}: {fn.__name__} must be a plain function (not async, not a generator)")
    try:
        inspect.signature(fn).bind(object())
    except TypeError:
        raise ConfigError(
            f"metric {name!r}: {fn.__name__}{inspect.signature(fn)} must take one argument, the case"
        ) from None


def code_hash(fn: Callable[..., Any]) -> str:
    """8 hex digits over the function's source and what it names of its own module: functions and classes
    (their sources, followed through the functions), and constants (their values)."""
    digest = hashlib.sha256(_source(fn, strict=True).encode())
    for name, text in _named(fn):
        digest.update(f"\0{name}\0{text}".encode())
    return digest.hexdigest()[:8]


def _source(obj: Any, strict: bool = False) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):  # typed at a prompt: no file holds it; its compiled code stands in
        code = getattr(obj, "__code__", None)
        if code is not None:
            return marshal.dumps(code).hex()
        if strict:
            raise ConfigError(f"cannot read the source of {obj!r}") from None
        return repr(obj)


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _named(fn: Any) -> list[tuple[str, str]]:
    """(name, source or value) of what `fn` names among its module's globals, followed through functions."""
    scope, module = fn.__globals__, fn.__module__
    found: dict[str, str] = {}
    todo = [fn]
    while todo:
        for name in sorted(_code_names(todo.pop().__code__)):
            obj = scope.get(name)
            if name in found or obj is fn:
                continue
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and obj.__module__ == module:
                found[name] = _source(obj)
                if inspect.isfunction(obj):
                    todo.append(obj)
            elif (text := _constant(obj)) is not None:
                found[name] = text
    return sorted(found.items())


def _constant(obj: Any, depth: int = 0) -> str | None:
    """The content of a value a metric reads as data (a threshold, a compiled pattern, a list, set or dict of
    words), as text that does not depend on the process (sets sorted); None for anything else."""
    if isinstance(obj, _CONSTANTS):
        return repr(obj)
    if isinstance(obj, re.Pattern):
        return f"re.compile({obj.pattern!r}, {int(obj.flags)})"
    if depth > 4 or not isinstance(obj, (tuple, list, set, frozenset, dict)):
        return None
    pairs = obj.items() if isinstance(obj, dict) else ((x, None) for x in obj)
    parts = []
    for key, value in pairs:
        k, v = _constant(key, depth + 1), _constant(value, depth + 1)
        if k is None or v is None:
            return None
        parts.append(f"{k}: {v}" if isinstance(obj, dict) else k)
    return f"{type(obj).__name__}[{', '.join(sorted(parts) if isinstance(obj, (set, frozenset)) else parts)}]"


def _first_line(fn: Any) -> int:
    return fn.__code__.co_firstlineno


def file_name(fn: Any) -> str:
    path = Path(fn.__code__.co_filename)
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.name if path.is_absolute() else str(path)


def registered(name: str) -> Metric | None:
    try:
        return get_metric(name)
    except UnknownNameError:
        return None


def _same_function(metric: Metric, fn: Any) -> bool:
    old = metric.fn.fn if isinstance(metric.fn, UserFunction) else None
    return old is not None and (old.__module__, old.__qualname__) == (fn.__module__, fn.__qualname__)


def _register(new: Metric, fn: Any) -> None:
    """add_metric, as the module being loaded (if any) defines it."""
    loading, earlier = LOADING.get(), registered(new.name)
    if loading is None:
        if earlier is not None and not earlier.builtin and _same_function(earlier, fn):
            # the same definition imported again (a worker unpickling an installed package's metric): as it was
            new = replace(new, origin=earlier.origin, source=earlier.source)
        else:
            new = replace(new, origin="plugin", source=f"{file_name(fn)}:{_first_line(fn)}")
            if new.origin == "plugin" and fn.__module__ in sys.modules and fn.__module__ != "__main__":
                cloudpickle.register_pickle_by_value(sys.modules[fn.__module__])
        add_metric(new)
        return
    new = replace(new, origin=loading.origin, source=loading.source(fn))
    if new.name in loading.defined:
        raise ConfigError(
            f"metric {new.name!r} is defined twice in {loading.label}: at {loading.defined[new.name].source} "
            f"and at {new.source}; rename one"
        )
    if new.name in loading.claimed:
        raise ConfigError(
            f"metric {new.name!r} is defined twice: by {loading.claimed[new.name]} and by {new.source}; rename one"
        )
    add_metric(new)
    loading.replaced.setdefault(new.name, earlier)
    loading.defined[new.name] = new


def roll_back(loading: Loading) -> None:
    """Undo what a module that failed halfway registered."""
    for name, earlier in loading.replaced.items():
        remove_metric(name)
        if earlier is not None:
            add_metric(earlier)


def readd(metrics: list[Metric], claimed: dict[str, str]) -> list[Metric]:
    """A module loaded before: its metrics again (another definition may have replaced one since)."""
    for m in metrics:
        if m.name in claimed:
            raise ConfigError(f"metric {m.name!r} is defined twice: by {claimed[m.name]} and by {m.source}; rename one")
        add_metric(m)
    return metrics
