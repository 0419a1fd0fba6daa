"""A user's own metrics in Python: `@raglake.metric(...)` (raglake.metrics.define) on a pure function of the
case, in a module named by the eval file (`plugins:`) or in an installed package (entry-point group
`raglake.metrics`).

A plugin file is imported under a module name of its own (stable per path, so loading it again replaces its
metrics) and registered with cloudpickle by value: a Dask worker in another process gets its functions
without importing the file. A plugin that fails to import is one ConfigError naming the plugin, the line
that raised, the exception and the eval file; nothing it registered stays."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import linecache
import re
import sys
import threading
import traceback
import types
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import cloudpickle

from raglake.errors import ConfigError, RaglakeError
from raglake.metrics.define import LOADING, MARK, Loading, metric, readd, registered, roll_back
from raglake.metrics.registry import Metric, add_metric, remove_metric

ENTRY_POINT_GROUP = "raglake.metrics"
_MODULE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# raglake's own frames and the import machinery's are not where a plugin failed
_NOT_THERE = (str(Path(__file__).resolve().parents[1]), str(Path(importlib.__file__).parent), "<frozen")

_LOCK = threading.RLock()
_FILES: dict[str, tuple[str, list[Metric]]] = {}  # plugin file (absolute) -> (sha256 of its bytes, its metrics)
_MODULES: dict[str, list[Metric]] = {}  # plugins named as modules (imported once) -> their metrics
_ENTRY_POINTS: list[str] | None = None  # load_entry_points' names, once per process

__all__ = ["ENTRY_POINT_GROUP", "load_entry_points", "load_plugins", "metric", "module_name"]


def load_plugins(paths: Sequence[str], base_dir: str, source: str | None = None) -> list[str]:
    """Import each plugin module (a .py file relative to `base_dir`, or an importable module name); the names
    of the metrics they registered. `source` (the eval file) is named in errors. One name defined by two
    plugins, or by a plugin and a built-in metric, is a ConfigError."""
    names: list[str] = []
    claimed: dict[str, str] = {}
    with _LOCK:
        for entry in paths:
            for m in _load(str(entry), base_dir, source, claimed):
                claimed[m.name] = m.source or entry
                names.append(m.name)
    return names


def _load(entry: str, base_dir: str, source: str | None, claimed: dict[str, str]) -> list[Metric]:
    named = f" (named in {source})" if source else ""
    if entry.endswith(".py") or "/" in entry or "\\" in entry:
        path = (Path(base_dir).expanduser() / Path(entry).expanduser()).resolve()
        if not path.is_file():
            raise ConfigError(f"plugin {entry}{named}: no such file {path}")
        return _load_file(entry, path, named, claimed)
    if not _MODULE.fullmatch(entry):
        raise ConfigError(f"plugin {entry!r}{named}: a plugin is a .py file or an importable module name")
    return _load_module(entry, base_dir, named, claimed)


def module_name(path: Path) -> str:
    """The module name a plugin file is imported under: one per path, whatever its content."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"_raglake_plugin_{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"


def _load_file(entry: str, path: Path, named: str, claimed: dict[str, str]) -> list[Metric]:
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"plugin {entry}{named}: cannot read {path}: {e}") from None
    digest = hashlib.sha256(data).hexdigest()
    before = _FILES.get(str(path))
    if before is not None and before[0] == digest:
        return readd(before[1], claimed)
    try:
        code = compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise ConfigError(f"plugin {entry}{named} failed to import: {entry}:{e.lineno}: SyntaxError: {e.msg}") from None
    # inspect.getsource (the version's hash) and tracebacks read this text, not a later edit of the file
    linecache.cache[str(path)] = (len(text), None, text.splitlines(True), str(path))
    name = module_name(path)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    loading = Loading("plugin", entry, claimed, file=str(path))
    previous = sys.modules.get(name)
    sys.modules[name] = module  # dataclasses and cloudpickle look the module up while it runs
    cloudpickle.register_pickle_by_value(module)
    token = LOADING.set(loading)
    try:
        exec(code, module.__dict__)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - reported as the plugin's error, with its line
        roll_back(loading)
        if previous is None:
            cloudpickle.unregister_pickle_by_value(module)
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous
        raise ConfigError(_failure(f"plugin {entry}{named} failed to import", e, str(path), entry)) from e
    finally:
        LOADING.reset(token)
    metrics = _defined(loading, f"plugin {entry}{named}")
    for old in before[1] if before is not None else []:  # a metric the file no longer defines goes
        if old.name not in loading.defined and registered(old.name) is old:
            remove_metric(old.name)
    _FILES[str(path)] = (digest, metrics)
    return metrics


def _load_module(entry: str, base_dir: str, named: str, claimed: dict[str, str]) -> list[Metric]:
    if entry in _MODULES:
        return readd(_MODULES[entry], claimed)
    loading = Loading("plugin", entry, claimed)
    token = LOADING.set(loading)
    try:
        module = importlib.import_module(entry)
    except ModuleNotFoundError as e:
        roll_back(loading)
        if e.name is not None and (entry == e.name or entry.startswith(e.name + ".")):
            raise ConfigError(
                f"plugin {entry}{named}: no file {entry} in {Path(base_dir).resolve()} and no module {e.name!r} "
                "to import (a file's name ends in .py)"
            ) from None
        raise ConfigError(_failure(f"plugin {entry}{named} failed to import", e, None, entry)) from e
    except (Exception, SystemExit) as e:  # noqa: BLE001 - reported as the plugin's error, with its line
        roll_back(loading)
        raise ConfigError(_failure(f"plugin {entry}{named} failed to import", e, None, entry)) from e
    finally:
        LOADING.reset(token)
    cloudpickle.register_pickle_by_value(module)
    if not loading.defined:  # imported before, outside a load: its decorators registered it then
        for m in _marked(module):
            loading.defined[m.name] = readd([m], claimed)[0]
    metrics = _defined(loading, f"plugin {entry}{named}")
    _MODULES[entry] = metrics
    return metrics


def _defined(loading: Loading, what: str) -> list[Metric]:
    if not loading.defined:
        raise ConfigError(f"{what} defines no metric: decorate a function of the case with @raglake.metric(name)")
    return list(loading.defined.values())


def _marked(module: types.ModuleType) -> list[Metric]:
    """The registered metrics of a module's decorated functions."""
    out = []
    for obj in vars(module).values():
        name = getattr(obj, MARK, None) if isinstance(obj, types.FunctionType) else None
        found = registered(name) if isinstance(name, str) else None
        if found is not None and obj.__module__ == module.__name__ and found not in out:
            out.append(found)
    return out


def _failure(what: str, e: BaseException, file: str | None, label: str) -> str:
    """`what`: <where> (<the line>): <ExcType>: <message>, where is the plugin's own line when the exception
    passed through it, else the innermost line outside raglake (and outside the import machinery)."""
    frames = traceback.extract_tb(e.__traceback__)
    own = [f for f in frames if f.filename == file] or [f for f in frames if not f.filename.startswith(_NOT_THERE)]
    at = own[-1] if own else None
    where = ""
    if at is not None:
        place = label if at.filename == file else _short_path(at.filename)
        where = f"{place}:{at.lineno}" + (f" ({at.line.strip()[:120]})" if at.line else "") + ": "
    if isinstance(e, RaglakeError):
        return f"{what}: {where}{e}"
    message = str(e)[:300]
    return f"{what}: {where}{type(e).__name__}" + (f": {message}" if message else "")


def _short_path(filename: str) -> str:
    """A file as short as it is clear: relative to the working folder, else to the import path it lies on."""
    path = Path(filename)
    roots = [root for root in [Path.cwd(), *(Path(p) for p in sys.path if p)] if path.is_relative_to(root)]
    return min((path.relative_to(root).as_posix() for root in roots if root != path), key=len, default=filename)


def load_entry_points() -> list[str]:
    """Load the installed packages' metrics (group `raglake.metrics`) once per process; their names. An entry
    point names a module (importing it registers its metrics) or a function decorated with @raglake.metric;
    one that fails is a ConfigError naming its package (and it is tried again on the next call)."""
    global _ENTRY_POINTS
    with _LOCK:
        if _ENTRY_POINTS is None:
            names: list[str] = []
            claimed: dict[str, str] = {}
            found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
            for ep in sorted(found, key=lambda ep: (ep.name, ep.value)):
                for m in _load_entry_point(ep, claimed):
                    claimed[m.name] = m.source or ep.value
                    names.append(m.name)
            _ENTRY_POINTS = names
        return list(_ENTRY_POINTS)


def _load_entry_point(ep: importlib.metadata.EntryPoint, claimed: dict[str, str]) -> list[Metric]:
    dist = f"{ep.dist.name} {ep.dist.version}" if ep.dist is not None else "an unknown package"
    label = f"entry point {ep.name} = {ep.value} of package {dist} (group {ENTRY_POINT_GROUP})"
    loading = Loading("entry_point", label, claimed, package=dist)
    token = LOADING.set(loading)
    try:
        obj = ep.load()
    except (Exception, SystemExit) as e:  # noqa: BLE001 - reported as the package's error, with its line
        roll_back(loading)
        raise ConfigError(_failure(f"{label} failed to load", e, None, ep.value)) from e
    finally:
        LOADING.reset(token)
    if ep.attr and getattr(obj, MARK, None) is None:  # it names an object: that one must be a metric
        roll_back(loading)
        raise ConfigError(
            f"{label} names {obj!r}, which is not a function decorated with @raglake.metric (an entry point "
            "names a module of metrics or one metric's function)"
        )
    metrics = list(loading.defined.values()) or _entry_metrics(obj, label)
    out = []
    for m in metrics:  # imported before, outside a load (it registered as a plugin then): an entry point's now
        if m.origin != "entry_point":
            remove_metric(m.name)
            m = add_metric(replace(m, origin="entry_point", source=f"{m.source} ({dist})"))
        out.append(m)
    return out


def _entry_metrics(obj: Any, label: str) -> list[Metric]:
    if isinstance(obj, types.ModuleType):
        found = _marked(obj)
    else:
        name = getattr(obj, MARK, None)
        found = [m for m in [registered(name)] if m is not None] if isinstance(name, str) else []
    if not found:
        raise ConfigError(
            f"{label} names {obj!r}, which is neither a module defining metrics nor a function decorated with "
            "@raglake.metric"
        )
    return found
