"""The lake's nested column types, the values the writers put in them, and how files of an older layout
read as the current one.

Nested fields with a known shape are Parquet maps, structs and lists of structs, so a plain reader
queries them without JSON functions (`runs.metric_version_map['mrr_at_k']`, `unnest(gold_support_list)`).
A typed column got a new name beside the JSON string column it replaced: one name with two types across
the files of one lake would break a plain reader of a lake holding old and new runs (DuckDB's
`union_by_name` and pyarrow's datasets both refuse to cast a string to a map), while two names read as
one typed column that is null for the old runs. The lake is append-only, so old files are never rewritten;
raglake's views read them through `current_columns`:
- a renamed column (RENAMED) is read under its new name;
- a JSON string column a typed one replaced (CONVERTED) is parsed into the typed column's type;
- a FILLED column an older file lacks is derived from one it has; any other missing column reads as nulls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from raglake.anchors import heading_string

_STR = pa.string()
# a heading path in the lake is one string, `A > B`, as in chunks.heading_path (segments joined by ` > `)
VERSION_MAP = pa.map_(_STR, _STR)
PROMPT_VERSION_MAP = pa.map_(_STR, pa.int32())
ANCHOR_FIELDS = [pa.field("rel_path", _STR), pa.field("heading_path", _STR)]
GOLD_SUPPORT = pa.struct(
    [*ANCHOR_FIELDS, ("snippets", pa.list_(_STR)), ("date", pa.date32()), ("required", pa.bool_())]
)
REFERENCE = pa.struct(ANCHOR_FIELDS)
SAMPLING_PARAMS = pa.struct([("temperature", pa.float64()), ("seed", pa.int64()), ("max_tokens", pa.int64())])

# columns renamed since older lakes were written: table -> {old name: new name}
RENAMED: dict[str, dict[str, str]] = {"runs": {"target": "target_spec"}}

_ANCHOR = '"rel_path": "VARCHAR", "heading_path": ["VARCHAR"]'
_SUPPORT = _ANCHOR + ', "snippets": ["VARCHAR"], "date": "DATE", "required": "BOOLEAN"'
_AS_STRING = "'rel_path': s.rel_path, 'heading_path': array_to_string(s.heading_path, ' > ')"
# typed column -> (the JSON string column of older lakes it replaced, the SQL reading that column, `{old}`,
# as the typed one); from_json ignores keys it is not asked for, and a null stays a null
CONVERTED: dict[str, dict[str, tuple[str, str]]] = {
    "runs": {
        "metric_version_map": ("metric_versions", """from_json({old}, '"MAP(VARCHAR, VARCHAR)"')"""),
        "prompt_version_map": ("prompt_versions", """from_json({old}, '"MAP(VARCHAR, INTEGER)"')"""),
    },
    "cases": {
        "gold_support_list": (
            "gold_supports",
            f"list_transform(from_json({{old}}, '[{{{_SUPPORT}}}]'), lambda s: {{{_AS_STRING}, "
            "'snippets': s.snippets, 'date': s.date, 'required': s.required})",
        ),
        "reference_list": (
            "references",
            f"list_transform(from_json({{old}}, '[{{{_ANCHOR}}}]'), lambda s: {{{_AS_STRING}}})",
        ),
    },
    "judge_calls": {
        "sampling_params": (
            "params",
            """from_json({old}, '{"temperature": "DOUBLE", "seed": "BIGINT", "max_tokens": "BIGINT"}')""",
        ),
    },
}
# a column older files lack, derived from another: table -> {column: the column whose value fills it}
FILLED: dict[str, dict[str, str]] = {"runs": {"target_name": "target_spec"}}


def old_names(table: str) -> set[str]:
    """Columns of older layouts that the current one reads under another name or type."""
    return set(RENAMED.get(table, {})) | {old for old, _ in CONVERTED.get(table, {}).values()}


def is_current(table: str, columns: Iterable[str], names: Sequence[str]) -> bool:
    """Whether files with these columns read as they are (no projection in the way of the scan)."""
    have = set(columns)
    return set(names) <= have and not old_names(table) & have and table not in FILLED


def current_columns(
    table: str, columns: Sequence[str], schema: pa.Schema, sql_type: Callable[[pa.DataType], str]
) -> list[str]:
    """Select expressions reading files with `columns` (the union of an older and a newer layout, say)
    as the table's current `schema` (partition column included), then any other column they hold."""
    have, built = set(columns), {}

    def expr(field: pa.Field) -> str:
        if field.name not in built:
            built[field.name] = _expression(table, field, have, schema, expr, sql_type)
        return built[field.name]

    out = [f'{expr(field)} AS "{field.name}"' for field in schema]
    return out + [f'"{c}"' for c in columns if c not in schema.names and c not in old_names(table)]


def _expression(
    table: str,
    field: pa.Field,
    have: set[str],
    schema: pa.Schema,
    expr: Callable[[pa.Field], str],
    sql_type: Callable[[pa.DataType], str],
) -> str:
    name, parts = field.name, []
    if name in have:
        parts.append(f'"{name}"')
    parts += [f'"{old}"' for old, new in RENAMED.get(table, {}).items() if new == name and old in have]
    old, reader = CONVERTED.get(table, {}).get(name, (None, ""))
    if old in have:
        parts.append(reader.replace("{old}", f'"{old}"'))
    source = FILLED.get(table, {}).get(name)
    if source is not None:
        parts.append(expr(schema.field(source)))
    if not parts:
        return f"CAST(NULL AS {sql_type(field.type)})"
    return parts[0] if len(parts) == 1 else f"coalesce({', '.join(parts)})"


def version_map(versions: dict[str, Any]) -> list[tuple[str, Any]]:
    """A name -> version dict as map entries, sorted by name."""
    return sorted(versions.items())


def gold_support_list(supports: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A golden case's gold supports (as `model_dump` gives them) as GOLD_SUPPORT values."""
    return [
        {
            "rel_path": s["rel_path"],
            "heading_path": heading_string(s["heading_path"]),
            "snippets": s["snippets"],
            "date": dt.date.fromisoformat(s["date"]) if isinstance(s["date"], str) else s["date"],
            "required": s["required"],
        }
        for s in supports
    ]


def reference_list(references: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A capture's references (as `model_dump` gives them) as REFERENCE values."""
    return [{"rel_path": r["rel_path"], "heading_path": heading_string(r["heading_path"])} for r in references]
