"""Markdown notes as heading sections: YAML front matter, ATX headings outside code fences, setext
headings. A section's heading path is the list of its ancestor headings and its own."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from raglake.yamltext import load_yaml

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Section:
    heading_path: tuple[str, ...]  # () for text before the first heading
    level: int  # 0 for text before the first heading
    heading_line: str  # the heading as written ('' for level 0)
    body: str  # the text under the heading, up to the next heading of any level, trimmed
    line: int  # 1-based line of the heading (or of the first body line) in the file


@dataclass
class Note:
    front_matter: dict[str, Any] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)
    front_matter_error: str | None = None


def split_front_matter(raw: str) -> tuple[dict[str, Any], str, int, str | None]:
    """(front matter, the rest, lines the front matter took, error) for a note that may start with '---'."""
    if not raw.startswith("---"):
        return {}, raw, 0, None
    lines = raw.split("\n")
    if lines[0].strip() != "---":
        return {}, raw, 0, None
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            text = "\n".join(lines[1:end])
            try:  # bounded: deep nesting and a billion laughs of aliases are refused, not expanded
                meta = load_yaml(text) or {}
                error = None if isinstance(meta, dict) else "front matter is not a mapping"
            except yaml.YAMLError as e:
                mark = getattr(e, "problem_mark", None)  # its line in the note: the opening '---' is line 1
                where = f" (line {mark.line + 2})" if mark is not None else ""
                meta, error = {}, f"front matter is not valid YAML{where}: {getattr(e, 'problem', e)}"
            return (meta if isinstance(meta, dict) else {}), "\n".join(lines[end + 1 :]), end + 1, error
    return {}, raw, 0, "front matter has no closing '---'"


def _clean(heading: str) -> str:
    return _WS.sub(" ", heading).strip()


def parse_note(raw: str) -> Note:
    """Sections in document order; code fences are opaque, so '# comment' inside one is body text."""
    meta, text, offset, error = split_front_matter(raw.replace("\r\n", "\n").replace("\r", "\n"))
    lines = text.split("\n")
    headings: list[tuple[int, int, str, str]] = []  # (line index, level, title, heading line(s))
    in_fence: str | None = None  # the opening fence run; only a run of the same character, at least as long, closes it
    setext_lines: set[int] = set()
    for i, line in enumerate(lines):
        fence = _FENCE.match(line)
        if fence:
            run = fence.group(1)
            if in_fence is None:
                in_fence = run
            elif run[0] == in_fence[0] and len(run) >= len(in_fence) and not line.strip()[len(run) :].strip():
                in_fence = None
            continue
        if in_fence:
            continue
        atx = _ATX.match(line)
        if atx and (atx.group(2) or "").strip():
            headings.append((i, len(atx.group(1)), _clean(atx.group(2)), line.strip()))
            continue
        under = _SETEXT.match(line)
        prev = lines[i - 1] if i > 0 else ""
        if (
            under
            and i > 0
            and prev.strip()
            and (i - 1) not in setext_lines
            and not _FENCE.match(prev)
            and not _ATX.match(prev)
            and not prev.lstrip().startswith(("-", "*", ">", "|"))
            and (i < 2 or not lines[i - 2].strip())
        ):
            level = 1 if under.group(1)[0] == "=" else 2
            headings.append((i - 1, level, _clean(prev), f"{prev.strip()}\n{line.strip()}"))
            setext_lines.update((i - 1, i))
    note = Note(front_matter=meta, front_matter_error=error)
    starts = [h[0] for h in headings]
    first = starts[0] if starts else len(lines)
    preamble = "\n".join(lines[:first]).strip()
    if preamble:
        note.sections.append(Section((), 0, "", preamble, offset + 1))
    stack: list[tuple[int, str]] = []
    for n, (i, level, title, heading_line) in enumerate(headings):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        body_start = i + (2 if "\n" in heading_line else 1)
        body_end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = "\n".join(lines[body_start:body_end]).strip()
        note.sections.append(Section(tuple(t for _, t in stack), level, heading_line, body, offset + i + 1))
    return note
