"""Is a schema-valid judge reply a real answer? A reply can fit the output schema and still say nothing:
the prompt's own example copied back (`{"questions": ["...", "...", "..."]}`, as SmolLM2-135M did), a
JSON-schema type name where text belongs (`"string"`), a template slot (`"<claim>"`), the field's own
name, an empty string where content is required, or one text repeated as every item of a list. Such a
reply is a `parse_error` with the reason, never `ok` (issue 14).

Only free text is checked: a string whose schema has no `enum`, `const` or `pattern` (an enum value such
as CORRECT is an answer, not a placeholder). Numbers, booleans and lists that are legitimately empty
(no claims found) pass as they are."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

# strings that are only dots, ellipses, dashes, underscores, asterisks or question marks ("", "...", "…", "--")
_NO_CONTENT = re.compile(r"^[\s.…·_\-–—*?]*$")
# a template slot: <claim>, {fact}, {{answer}}, [reasoning], <...>
_SLOT = re.compile(r"^(?:<[^<>]{0,40}>|\{\{?[^{}]{0,40}\}?\}|\[[^\[\]]{0,40}\])$")
# JSON-schema words and the like where a text belongs
_SCHEMA_WORDS = frozenset(
    "string str text integer int number float boolean bool array list object dict null none "
    "undefined nan n/a na tbd todo xxx placeholder example lorem ipsum".split()
)
# an echo of a schema fragment: type: string, {"type": "string"}, "type": "array"
_SCHEMA_ECHO = re.compile(r"""^\{?\s*["']?type["']?\s*:\s*["']?[a-z]+["']?\s*,?.*\}?$""", re.IGNORECASE)
# a quoted string of a template, and whether it is a key (followed by a colon)
_QUOTED = re.compile(r'"((?:[^"\\\n]|\\.){0,80})"(\s*:)?')


def example_strings(templates: tuple[str, ...], schema: dict[str, Any]) -> frozenset[str]:
    """The quoted values of a prompt's templates (its example reply: `"..."`), normalised, less the
    schema's enum values (CORRECT is an answer): a free-text answer equal to one is an echo of the prompt."""
    quoted = {_norm(m.group(1)) for t in templates for m in _QUOTED.finditer(t) if not m.group(2)}
    return frozenset(quoted - {_norm(str(v)) for v in _enum_values(schema)})


def _enum_values(schema: Any) -> list[Any]:
    if isinstance(schema, dict):
        own = [*schema.get("enum", []), *([schema["const"]] if "const" in schema else [])]
        return own + [v for sub in schema.values() for v in _enum_values(sub)]
    if isinstance(schema, list):
        return [v for sub in schema for v in _enum_values(sub)]
    return []


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split()).strip().strip("\"'`").casefold()


def placeholder_reason(text: str, field: str, echoes: frozenset[str] = frozenset()) -> str | None:
    """Why `text` (a non-empty free-text value of `field`) is a placeholder, or None when it may be content."""
    norm = _norm(text)
    if _NO_CONTENT.match(text):
        return f"placeholder {text.strip()!r}"
    if norm in _SCHEMA_WORDS or _SCHEMA_ECHO.match(text.strip()):
        return f"schema echo {text.strip()[:40]!r}"
    if _SLOT.match(text.strip()):
        return f"template slot {text.strip()[:40]!r}"
    names = {_norm(field), _norm(field.replace("_", " ")), _norm(field.rstrip("s"))}
    if norm in names:
        return f"the field's own name {text.strip()[:40]!r}"
    if norm in echoes:
        return f"an echo of the prompt's example {text.strip()[:40]!r}"
    return None


def degenerate_reason(schema: dict[str, Any], data: Any, echoes: frozenset[str] = frozenset()) -> str | None:
    """Why a reply that fits `schema` is no real answer (the first problem, with its path), or None."""
    why = _walk(schema, data, "", "reply", True, echoes)
    return f"not a real answer: {why}" if why else None


def _walk(
    schema: dict[str, Any], data: Any, path: str, field: str, required: bool, echoes: frozenset[str]
) -> str | None:
    where = path or "(top level)"
    if isinstance(data, str):
        if any(k in schema for k in ("enum", "const", "pattern")):
            return None
        if not data.strip():
            return f"{where}: empty text where content is required" if required else None
        why = placeholder_reason(data, field, echoes)
        return f"{where}: {why}" if why else None
    if isinstance(data, dict):
        props, needed = schema.get("properties", {}), set(schema.get("required", []))
        for key, value in data.items():
            if key not in props:  # beyond the schema: not what the metrics read
                continue
            why = _walk(props[key], value, f"{path}/{key}".lstrip("/"), key, key in needed, echoes)
            if why:
                return why
        return None
    if isinstance(data, list):
        items = schema.get("items", {}) if isinstance(schema.get("items"), dict) else {}
        for i, value in enumerate(data):
            why = _walk(items, value, f"{path}/{i}".lstrip("/"), field, True, echoes)
            if why:
                return why
        texts = [_norm(v) for v in data if isinstance(v, str)]
        if len(texts) >= 2 and len(set(texts)) == 1 and not any(k in items for k in ("enum", "const")):
            return f"{where}: the same text {data[0].strip()[:40]!r} as every item"
    return None
