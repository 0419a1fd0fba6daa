"""Targets produce captures; `make_target` turns a `--target` spec into one."""

from __future__ import annotations

from collections.abc import Callable

from raglake.errors import ConfigError, UnknownNameError
from raglake.lake.store import Lake
from raglake.targets.base import Target
from raglake.targets.replay import ReplayFile, ReplayRun

_KINDS: dict[str, Callable[[str, Lake], Target]] = {
    "replay": lambda arg, lake: ReplayFile(arg),
    "replay-run": lambda arg, lake: ReplayRun(arg, lake),
}


def make_target(spec: str, lake: Lake) -> Target:
    """`replay:FILE` or `replay-run:RUN_ID`."""
    kind, sep, arg = spec.partition(":")
    if kind not in _KINDS:
        raise UnknownNameError("target kind", kind, _KINDS)
    if not sep or not arg:
        raise ConfigError(f"target {spec!r} needs an argument, e.g. '{kind}:…'")
    return _KINDS[kind](arg, lake)


__all__ = ["Target", "make_target"]
