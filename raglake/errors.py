"""The project's exceptions: each says where the problem is and, when it can, what was meant."""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Iterable
from pathlib import Path


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest choice, or '' when nothing is close."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class RaglakeError(Exception):
    """Base class: every error raglake raises on purpose."""


class InputError(RaglakeError):
    """A bad input file: names the file, the line (1-based) and the field."""

    def __init__(self, path: str, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        where = self.path + (f":{line}" if line is not None else "")
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")

    def __reduce__(self) -> tuple:
        """Pickled with its four parts (it crosses from a process that validated a file)."""
        return type(self), (self.path, self.line, self.field, self.message)


class ConfigError(RaglakeError):
    """A bad option, target spec, metric name or run id."""


class LakeError(RaglakeError):
    """The lake cannot be read or written as asked."""


class LakeWriteError(LakeError):
    """A file of the lake or of the results location could not be written (a full disk, a read-only mount)."""


class UnknownNameError(ConfigError):
    """A name (metric, run, dimension, target kind) that is not known, with a suggestion."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        choices = sorted(choices)
        self.kind, self.name, self.choices = kind, name, choices
        listing = ", ".join(choices[:12]) + (" …" if len(choices) > 12 else "")
        super().__init__(f"unknown {kind} {name!r}{did_you_mean(name, choices)}; known: {listing}")

    def __reduce__(self) -> tuple:
        """Pickled with its three parts (a Dask worker sends it back to the flow)."""
        return type(self), (self.kind, self.name, self.choices)


def unexpected_error(e: BaseException) -> str:
    """How an exception nobody expected is recorded as one case's failure: its type, message and the
    innermost line that raised it, so a programming error stays visible in the run's reasons."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"unexpected {type(e).__name__}: {str(e)[:300]}{where}"
