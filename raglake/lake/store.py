"""The lake on a filesystem (a local folder or any fsspec URL, an object store's included): append-only,
atomic file writes (on an object store, one upload per file: raglake.lake.objects), and the listing of a
table's committed files (the sound ones: raglake.lake.checks)."""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from raglake.errors import LakeError, LakeWriteError
from raglake.lake import objects
from raglake.lake.checks import Damage, check_lake_root, report, survey
from raglake.lake.tables import TABLES, TableSpec

DEFAULT_LAKE = "data/lake"
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:+-]*$")


ROW_GROUP_ROWS = 128 * 1024
# and at most about this much Arrow data: a wide table's group (`cases`: questions, answers, contexts) is held
# and encoded whole, which made the largest 128k-row group the peak of a 1M-case run (issue 29: ~139 MiB of
# Arrow, ~260 MiB more while encoding)
ROW_GROUP_BYTES = 48 * 1024 * 1024


def _row_groups(table: str, parts: Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The parts, checked against the table's schema, regrouped into row groups of about ROW_GROUP_ROWS rows
    or ROW_GROUP_BYTES of Arrow data, whichever comes first."""
    schema, held, rows, size, wrote = TABLES[table].schema, [], 0, 0, False
    for part in parts:
        if part.schema != schema:
            raise LakeError(f"data for {table} does not have the table's schema:\n{part.schema}")
        held.append(part)
        rows += part.num_rows
        size += part.nbytes
        if rows >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
            yield pa.concat_tables(held)
            held, rows, size, wrote = [], 0, 0, True
    if held or not wrote:  # what is left, or an empty table when there were no rows at all
        yield pa.concat_tables(held) if held else schema.empty_table()


def _write_parquet(table: str, parts: Iterable[pa.Table], sink: Any) -> None:
    """The table's parts as one zstd Parquet file at `sink` (a path or an open binary file)."""
    with pq.ParquetWriter(sink, TABLES[table].schema, compression="zstd") as writer:
        for group in _row_groups(table, parts):
            writer.write_table(group)


def lake_root(explicit: str | None = None) -> str:
    """`--lake`, else $RAGLAKE_LAKE, else data/lake (relative to the working directory)."""
    return explicit or os.environ.get("RAGLAKE_LAKE") or DEFAULT_LAKE


class Lake:
    def __init__(self, root: str | Path | None = None):
        self.url = str(lake_root(str(root) if root else None))
        check_lake_root(self.url)  # a file or a device: one clear line, not a traceback from deep inside
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.is_local = "file" in protocols
        self.is_object_store = objects.is_object_store(self.fs)

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
        """Write one new file atomically. `data`: one table, or parts of one streamed into the file (row
        groups of about ROW_GROUP_ROWS rows; only that much is held at once). In a folder: a temp name,
        then a link to the final one; on an object store: the finished file sent once, straight to its
        final key (raglake.lake.objects: a PUT or a multipart upload, whole or not at all).

        An existing file is never replaced (a local lake's link and S3's If-None-Match refuse it, so two
        writers cannot both win; elsewhere an existence check guards it), except with `replace_uncommitted`:
        a run's own files from an attempt that crashed before its `runs` row landed (readers never saw
        those files)."""
        spec = TABLES[table]
        folder = self._dir(spec, partition_value)
        final = f"{folder}/{stem}.parquet"
        parts = [data] if isinstance(data, pa.Table) else data
        if self.is_object_store:
            self._send(table, parts, final, replace_uncommitted)
            return final
        if self.fs.exists(final) and not replace_uncommitted:
            raise LakeError(f"{final} already exists; the lake is append-only")
        tmp = f"{folder}/.{stem}.{uuid.uuid4().hex[:8]}.parquet.tmp"
        try:
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(tmp, "wb") as f:
                _write_parquet(table, parts, f)
            self._publish(tmp, final, replace_uncommitted)
        except OSError as e:  # a full disk, a read-only mount: one line naming the file
            raise LakeWriteError(f"cannot write {final}: {e.strerror or e}") from None
        finally:
            self._discard(tmp)
        return final

    def _send(self, table: str, parts: Iterable[pa.Table], final: str, replace: bool) -> None:
        """Finish the file in a local temporary folder, then send it to its key in one upload."""
        with tempfile.TemporaryDirectory(prefix="raglake-upload-") as folder:
            local = f"{folder}/{final.rsplit('/', 1)[-1]}"
            try:
                _write_parquet(table, parts, local)
            except OSError as e:
                raise LakeWriteError(f"cannot write {self._url(final)}: {e.strerror or e}") from None
            objects.put_file(self.fs, local, final, create=not replace)

    def _discard(self, tmp: str) -> None:
        """Remove a temp file if it is there (after a failed write too: a full disk still lets it go)."""
        try:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
        except OSError as e:
            raise LakeWriteError(f"cannot remove the temp file {tmp}: {e.strerror or e}") from None

    def rewrite(self, table: str, partition_value: str, data: pa.Table, stem: str) -> str:
        """Replace an existing file by a new one of the same name, atomically (temp file, then a rename
        over it; on an object store, a PUT over the key): a reader sees the old file or the new one, never
        a mix. Only for a change that keeps
        every row (raglake.lake.latest flips `scores.is_latest`)."""
        return self.write(table, partition_value, data, stem, replace_uncommitted=True)

    def _publish(self, tmp: str, final: str, replace: bool) -> None:
        """Rename the finished temp file into place; without `replace`, never over an existing file."""
        if not self.is_local or replace:  # a local rename, or a remote filesystem's own (sftp, hdfs)
            self.fs.mv(tmp, final)
            return
        try:
            os.link(tmp, final)  # atomic, and fails when `final` exists (a rename would replace it)
        except FileExistsError:
            raise LakeError(f"{final} already exists; the lake is append-only") from None
        except OSError:  # a filesystem without hard links: the existence check in write() is the guard
            self.fs.mv(tmp, final)

    def _forget(self, path: str) -> None:
        """Drop the filesystem's cached listings of `path` and everything under it (s3fs keeps each folder's
        listing for the process: another writer's files, landed since, would not be seen)."""
        self.fs.invalidate_cache(path)
        cache = getattr(self.fs, "dircache", None)
        if cache:
            for key in [k for k in list(cache) if k.startswith(f"{path}/")]:
                cache.pop(key, None)

    def partition_files(self, table: str, partition_value: str) -> list[str]:
        """Every file in one partition folder, temp files of interrupted writes included."""
        folder = self._dir(TABLES[table], partition_value)
        self._forget(folder)
        return sorted(self.fs.ls(folder, detail=False)) if self.fs.isdir(folder) else []

    def temp_files(self, table: str, stem: str) -> list[str]:
        """Temp files that an interrupted write of `stem` left in any partition of a table."""
        spec = TABLES[table]
        return sorted(self.fs.glob(f"{self.root.rstrip('/')}/{spec.name}/{spec.partition}=*/.{stem}.*.parquet.tmp"))

    def remove(self, paths: list[str]) -> None:
        for path in paths:
            self.fs.rm(path)

    def _listing(self, table: str) -> dict[str, dict[str, Any]]:
        """A table's committed-name parquet files (temporary files are never listed), path -> fsspec info."""
        spec = TABLES[table]
        self._forget(f"{self.root.rstrip('/')}/{spec.name}")  # what other writers landed since
        pattern = f"{self.root.rstrip('/')}/{spec.name}/{spec.partition}=*/*.parquet"
        found = self.fs.glob(pattern, detail=True)
        return found if isinstance(found, dict) else {f: self.fs.info(f) for f in found}

    def _url(self, path: str) -> str:
        return path if self.is_local else self.fs.unstrip_protocol(path)

    def _urls(self, paths: Iterable[str]) -> list[str]:
        return [self._url(p) for p in sorted(paths)]

    def listed(self, table: str) -> list[str]:
        """Every committed-name parquet file of a table, sound or not (temporary files are never listed)."""
        return self._urls(self._listing(table))

    def survey(self, table: str, keep: Callable[[str], bool] | None = None) -> tuple[list[str], list[Damage]]:
        """Of a table's files (those `keep` selects, given each path), the sound ones and the damaged or
        foreign ones with the reason (raglake.lake.checks: footer and schema, checked once per file version)."""
        listing = self._listing(table)
        chosen = {p: info for p, info in listing.items() if keep is None or keep(self._url(p))}
        sound, damaged = survey(self.fs, table, chosen, local=self.is_local)
        if not self.is_local:
            damaged = [Damage(self._url(d.path), d.table, d.reason, d.unit) for d in damaged]
        return self._urls(sound), damaged

    def files(self, table: str) -> list[str]:
        """Every committed, sound parquet file of a table: a damaged or foreign one is left out with one
        warning line naming it (raglake.lake.query.connect also leaves out the run it belongs to)."""
        sound, damaged = self.survey(table)
        report(damaged)
        return sound

    def exists(self) -> bool:
        return self.fs.exists(f"{self.root.rstrip('/')}/runs")

    def snapshot(self) -> dict[str, int]:
        """Number of files per table, sound or not (tests use it to prove a failed run landed nothing)."""
        return {t: len(self.listed(t)) for t in TABLES}
