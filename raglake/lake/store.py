"""The lake on a filesystem (a local folder or any fsspec URL): append-only, atomic file writes,
and the listing of a table's committed files."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from raglake.errors import LakeError
from raglake.lake.tables import TABLES, TableSpec

DEFAULT_LAKE = "data/lake"
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]*$")


ROW_GROUP_ROWS = 128 * 1024


def _row_groups(table: str, parts: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The parts, checked against the table's schema, regrouped into row groups of about ROW_GROUP_ROWS."""
    schema, held, rows, wrote = TABLES[table].schema, [], 0, False
    for part in parts:
        if part.schema != schema:
            raise LakeError(f"data for {table} does not have the table's schema:\n{part.schema}")
        held.append(part)
        rows += part.num_rows
        if rows >= ROW_GROUP_ROWS:
            yield pa.concat_tables(held)
            held, rows, wrote = [], 0, True
    if held or not wrote:  # what is left, or an empty table when there were no rows at all
        yield pa.concat_tables(held) if held else schema.empty_table()


def lake_root(explicit: str | None = None) -> str:
    """`--lake`, else $RAGLAKE_LAKE, else data/lake (relative to the working directory)."""
    return explicit or os.environ.get("RAGLAKE_LAKE") or DEFAULT_LAKE


class Lake:
    def __init__(self, root: str | Path | None = None):
        self.url = str(lake_root(str(root) if root else None))
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.is_local = "file" in protocols

    def _dir(self, spec: TableSpec, partition_value: str) -> str:
        value = str(partition_value)
        if not _SAFE_VALUE.match(value):
            raise LakeError(f"partition value {value!r} of table {spec.name} has characters a path cannot hold")
        return f"{self.root.rstrip('/')}/{spec.name}/{spec.partition}={value}"

    def write(
        self,
        table: str,
        partition_value: str,
        data: pa.Table | Iterable[pa.Table],
        stem: str,
        *,
        replace_uncommitted: bool = False,
    ) -> str:
        """Write one new file atomically (temp name, then rename). `data`: one table, or parts of one
        streamed into the file (row groups of about ROW_GROUP_ROWS rows; only that much is held at once).

        An existing file is never replaced (on a local lake the rename itself refuses, so two writers
        cannot both win), except with `replace_uncommitted`: a run's own files from an attempt that
        crashed before its `runs` row landed (readers never saw those files)."""
        spec = TABLES[table]
        folder = self._dir(spec, partition_value)
        final = f"{folder}/{stem}.parquet"
        if self.fs.exists(final) and not replace_uncommitted:
            raise LakeError(f"{final} already exists; the lake is append-only")
        tmp = f"{folder}/.{stem}.{uuid.uuid4().hex[:8]}.parquet.tmp"
        self.fs.makedirs(folder, exist_ok=True)
        try:
            with self.fs.open(tmp, "wb") as f, pq.ParquetWriter(f, spec.schema, compression="zstd") as writer:
                for group in _row_groups(table, [data] if isinstance(data, pa.Table) else data):
                    writer.write_table(group)
            self._publish(tmp, final, replace_uncommitted)
        finally:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
        return final

    def rewrite(self, table: str, partition_value: str, data: pa.Table, stem: str) -> str:
        """Replace an existing file by a new one of the same name, atomically (temp file, then a rename
        over it): a reader sees the old file or the new one, never a mix. Only for a change that keeps
        every row (raglake.lake.latest flips `scores.is_latest`)."""
        return self.write(table, partition_value, data, stem, replace_uncommitted=True)

    def _publish(self, tmp: str, final: str, replace: bool) -> None:
        """Rename the finished temp file into place; without `replace`, never over an existing file."""
        if not self.is_local or replace:
            self.fs.mv(tmp, final)
            return
        try:
            os.link(tmp, final)  # atomic, and fails when `final` exists (a rename would replace it)
        except FileExistsError:
            raise LakeError(f"{final} already exists; the lake is append-only") from None
        except OSError:  # a filesystem without hard links: the existence check in write() is the guard
            self.fs.mv(tmp, final)

    def partition_files(self, table: str, partition_value: str) -> list[str]:
        """Every file in one partition folder, temp files of interrupted writes included."""
        folder = self._dir(TABLES[table], partition_value)
        return sorted(self.fs.ls(folder, detail=False)) if self.fs.isdir(folder) else []

    def temp_files(self, table: str, stem: str) -> list[str]:
        """Temp files that an interrupted write of `stem` left in any partition of a table."""
        spec = TABLES[table]
        return sorted(self.fs.glob(f"{self.root.rstrip('/')}/{spec.name}/{spec.partition}=*/.{stem}.*.parquet.tmp"))

    def remove(self, paths: list[str]) -> None:
        for path in paths:
            self.fs.rm(path)

    def files(self, table: str) -> list[str]:
        """Every committed parquet file of a table (temporary files are never listed)."""
        spec = TABLES[table]
        pattern = f"{self.root.rstrip('/')}/{spec.name}/{spec.partition}=*/*.parquet"
        found = sorted(self.fs.glob(pattern))
        return found if self.is_local else [self.fs.unstrip_protocol(f) for f in found]

    def exists(self) -> bool:
        return self.fs.exists(f"{self.root.rstrip('/')}/runs")

    def snapshot(self) -> dict[str, int]:
        """Number of files per table (tests use it to prove a failed run landed nothing)."""
        return {t: len(self.files(t)) for t in TABLES}
