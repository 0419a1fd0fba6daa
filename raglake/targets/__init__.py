"""Targets produce captures; `make_target` turns a `--target` spec into one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from raglake.errors import ConfigError, UnknownNameError
from raglake.lake.store import Lake
from raglake.targets.base import Target
from raglake.targets.builtin import BuiltinTarget
from raglake.targets.http import HttpTarget
from raglake.targets.replay import ReplayFile, ReplayRun


def _builtin(arg: str, lake: Lake, embedder: str | None) -> Target:
    return BuiltinTarget(arg, lake.url, embedder)


def _http(arg: str, lake: Lake, embedder: str | None, k: int) -> Target:
    return HttpTarget(arg, k)


_KINDS: dict[str, Callable[[str, Lake, str | None, int], Target]] = {
    "replay": lambda arg, lake, embedder, k: ReplayFile(arg),
    "replay-run": lambda arg, lake, embedder, k: ReplayRun(arg, lake),
    "builtin": lambda arg, lake, embedder, k: _builtin(arg, lake, embedder),
    "http": _http,
}
_OPTIONAL_ARGUMENT = ("builtin",)


def make_target(spec: str, lake: Lake, *, embedder: str | None = None, k: int = 5) -> Target:
    """`builtin[:CORPUS_DIR]`, `http:CONFIG.yaml`, `replay:FILE` or `replay-run:RUN_ID`."""
    kind, sep, arg = spec.partition(":")
    kind, query_sep, query = kind.partition("?")
    if kind not in _KINDS:
        raise UnknownNameError("target kind", kind, _KINDS)
    if (not sep or not arg) and kind not in _OPTIONAL_ARGUMENT:
        raise ConfigError(f"target {spec!r} needs an argument, e.g. '{kind}:…'")
    if query_sep:  # builtin?folder_mode=off (no corpus folder given)
        arg = f"{arg}?{query}"
    return _KINDS[kind](arg, lake, embedder, k)


def validated_file(spec: str) -> Path | None:
    """The file a target of this spec reads and validates whole as it is made (`replay:FILE`), else None."""
    kind, sep, arg = spec.partition(":")
    return Path(arg) if kind == "replay" and sep and arg else None


__all__ = ["Target", "make_target", "validated_file"]
