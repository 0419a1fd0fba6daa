"""Reading JSONL, JSON-list and YAML record files with the line of every record, and turning
validation errors into messages that name file, line and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from raglake import textfiles
from raglake.errors import InputError, did_you_mean
from raglake.textfiles import (
    CONFIG_MAX_BYTES,
    LineIndex,
    element_offsets,
    member_offset,
    parse_json,
    read_text,
    skip_ws,
)
from raglake.yamltext import parse_yaml

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Record:
    """One object of a record file, with the 1-based line it starts on (and its keys' lines)."""

    line: int
    data: Any
    key_lines: dict[str, int] = field(default_factory=dict)


def read_records(path: str | Path, *, list_key: str | tuple[str, ...] = "cases", limit: bool = True) -> list[Record]:
    """Records of a .jsonl/.ndjson, .json (a list, or an object holding `list_key`: the first of them it holds) or
    .yaml file. `limit`: a JSONL line over raglake.textfiles.MAX_RECORD_BYTES is an InputError (raglake's own dumps
    are read at any length)."""
    path = Path(path)
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        return _yaml_records(path, text, list_key)
    if suffix == ".json":
        return _json_list_records(path, text, list_key)
    return _jsonl_records(path, text, textfiles.MAX_RECORD_BYTES if limit else None)


def _jsonl_records(path: Path, text: str, limit: int | None) -> list[Record]:
    out = []
    for number, raw in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 & co. are legal in JSON strings
        if not raw.strip() or raw.lstrip().startswith("//"):
            continue
        if size := textfiles.over(raw, limit):
            raise textfiles.too_long(path, number, size)
        out.append(Record(number, parse_json(path, raw, number)))
    return out


def _held_key(doc: Any, keys: str | tuple[str, ...]) -> str:
    """The first of `keys` whose value in `doc` is a list (else the first key, for the error message)."""
    keys = (keys,) if isinstance(keys, str) else keys
    return next((k for k in keys if isinstance(doc, dict) and isinstance(doc.get(k), list)), keys[0])


def _json_list_records(path: Path, text: str, keys: str | tuple[str, ...]) -> list[Record]:
    doc = parse_json(path, text)
    list_key = _held_key(doc, keys)
    if isinstance(doc, dict) and isinstance(doc.get(list_key), list):
        start = member_offset(text, list_key)
        doc = doc[list_key]
    elif isinstance(doc, list):
        start = skip_ws(text, 0)
    else:
        raise InputError(str(path), 1, None, f"expected a JSON list of objects or an object with a {list_key!r} list")
    lines = LineIndex(text)
    return [Record(lines.line(offset), item) for offset, item in zip(element_offsets(text, start), doc)]


def read_yaml_mapping(path: str | Path, *, missing: str, not_mapping: str) -> tuple[Record, Any]:
    """A YAML (or JSON) config file holding one mapping, as a Record whose keys carry their lines, plus its
    node tree; a missing file, one over CONFIG_MAX_BYTES, invalid YAML or a non-mapping raise InputError."""
    path = Path(path)
    if not path.exists():
        raise InputError(str(path), None, None, missing)
    text = read_text(path, max_bytes=CONFIG_MAX_BYTES)
    data, node = parse_yaml(path, text)
    if not isinstance(data, dict):
        raise InputError(str(path), 1, None, not_mapping)
    return Record(1, data, _key_lines(node, LineIndex(text))), node


def _key_lines(node: Any, lines: LineIndex) -> dict[Any, int]:
    return {k.value: lines.line(k.start_mark.index) for k, _ in node.value if isinstance(k, yaml.ScalarNode)}


def _yaml_records(path: Path, text: str, keys: str | tuple[str, ...]) -> list[Record]:
    doc, node = parse_yaml(path, text)
    list_key = _held_key(doc, keys)
    if isinstance(doc, dict) and isinstance(doc.get(list_key), list):
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == list_key), None)
        doc = doc[list_key]
    if not isinstance(doc, list) or not isinstance(node, yaml.SequenceNode):
        raise InputError(str(path), 1, None, f"expected a YAML list of mappings or a mapping with a {list_key!r} list")
    lines = LineIndex(text)
    out = []
    for item_node, item in zip(node.value, doc):
        keys = (
            _key_lines(item_node, lines) if isinstance(item, dict) and isinstance(item_node, yaml.MappingNode) else {}
        )
        out.append(Record(lines.line(item_node.start_mark.index), item, keys))
    return out


def _field_name(loc: tuple[Any, ...]) -> str:
    name = ""
    for part in loc:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name


def validate_record(record: Record, model: type[M], path: str | Path, context: dict[str, Any] | None = None) -> M:
    """The record as `model`, or an InputError naming file, line and the first bad field (`context`: pydantic's
    validation context, e.g. raglake.schemas.CANONICAL for a model's own dump)."""
    if not isinstance(record.data, dict):
        raise InputError(str(path), record.line, None, f"expected an object, got {type(record.data).__name__}")
    try:
        return model.model_validate(record.data, context=context)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        field_name = _field_name(loc) or None
        line = record.key_lines.get(str(loc[0]), record.line) if loc else record.line
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(model, loc)
            message = f"unknown field{did_you_mean(str(loc[-1]), allowed)}"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif "input" in err and err["type"] not in ("value_error",) and not isinstance(err["input"], (dict, list)):
            message += f" (got {err['input']!r})"
        more = len(e.errors()) - 1
        if more:
            message += f" (and {more} more error{'s' if more > 1 else ''} in this record)"
        raise InputError(str(path), line, field_name, message) from None


def _allowed_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names valid at `loc` (walks nested models so suggestions fit the nesting level)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue
        info = getattr(current, "model_fields", {}).get(part)
        current = _inner_model(info.annotation) if info else None
    return list(getattr(current, "model_fields", {}) or model.model_fields)


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None
