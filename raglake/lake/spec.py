"""What a lake table is (its spec: schema with column descriptions, partition column) and the check that
turns a writer's columns into a table of exactly that schema. The tables themselves: raglake.lake.tables."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from raglake.errors import LakeError

TS = pa.timestamp("us", tz="UTC")
DESCRIPTION = b"description"


@dataclass(frozen=True)
class TableSpec:
    name: str
    partition: str
    partition_type: pa.DataType
    schema: pa.Schema  # without the partition column
    doc: str = ""
    partition_doc: str = ""

    @property
    def full_schema(self) -> pa.Schema:
        return self.schema.append(pa.field(self.partition, self.partition_type))

    def description(self, column: str) -> str:
        """A column's description ("" where none is given)."""
        if column == self.partition:
            return self.partition_doc
        meta = self.schema.field(column).metadata or {}
        return meta.get(DESCRIPTION, b"").decode()


Column = tuple[str, pa.DataType] | tuple[str, pa.DataType, str]


def table_spec(
    name: str,
    partition: str,
    fields: list[Column],
    ptype: pa.DataType = pa.string(),
    *,
    doc: str = "",
    partition_doc: str = "",
) -> TableSpec:
    """A table's spec; a column is (name, type, description) (a description-less column fails the docs test)."""
    made = [pa.field(c[0], c[1], metadata={DESCRIPTION: c[2]} if len(c) > 2 else None) for c in fields]
    return TableSpec(name, partition, ptype, pa.schema(made), doc, partition_doc)


def to_arrow(spec: TableSpec, columns: dict[str, list], *, optional: Sequence[str] = ()) -> pa.Table:
    """Columns as a table of exactly the spec's schema. Every column must be given, of one length:
    a forgotten column is a LakeError, not nulls, unless it is named in `optional` (then it is nulls)."""
    names = spec.schema.names
    unknown = sorted(set(columns) - set(names))
    if unknown:
        raise LakeError(f"columns {unknown} are not in the {spec.name} schema (its columns: {', '.join(names)})")
    missing = [n for n in names if n not in columns and n not in optional]
    if missing:
        raise LakeError(f"rows for table {spec.name} lack column(s) {', '.join(missing)}")
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise LakeError(
            f"the columns given for table {spec.name} have different lengths: "
            + ", ".join(f"{k}={len(v)}" for k, v in columns.items())
        )
    n = lengths.pop() if lengths else 0
    arrays = [pa.array(columns[f.name] if f.name in columns else [None] * n, type=f.type) for f in spec.schema]
    return pa.Table.from_arrays(arrays, schema=spec.schema)
