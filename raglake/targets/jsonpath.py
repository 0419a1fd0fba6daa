"""A small JSON path: `a.b[0].c` (a leading `$` or `$.` is allowed). Enough to map a service's
response onto a capture without a dependency."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
MISSING = object()


@lru_cache(maxsize=1024)
def parse_path(path: str) -> tuple[str | int, ...]:
    text = path.strip()
    text = text[1:] if text.startswith("$") else text
    text = text[1:] if text.startswith(".") else text
    return tuple(m.group(1) if m.group(1) is not None else int(m.group(2)) for m in _TOKEN.finditer(text))


def get_path(data: Any, path: str) -> Any:
    """The value at `path`, or MISSING when any step is absent."""
    current = data
    for part in parse_path(path):
        if isinstance(part, int):
            if not isinstance(current, list) or part >= len(current):
                return MISSING
            current = current[part]
        else:
            if not isinstance(current, dict) or part not in current:
                return MISSING
            current = current[part]
    return current
