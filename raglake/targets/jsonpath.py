"""A small JSON path: `a.b[0].c` (a leading `$` or `$.` is allowed). Enough to map a service's
response onto a capture without a dependency."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
MISSING = object()


def parse_path(path: str) -> list[str | int]:
    text = path.strip()
    text = text[1:] if text.startswith("$") else text
    text = text[1:] if text.startswith(".") else text
    parts: list[str | int] = []
    for m in _TOKEN.finditer(text):
        parts.append(m.group(1) if m.group(1) is not None else int(m.group(2)))
    return parts


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
