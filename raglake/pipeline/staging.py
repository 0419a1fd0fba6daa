"""A run's data by reference: what the tasks of a flow hand each other are small `BatchRef`s and
`ScoredRef`s naming files in the results location (a local folder or any fsspec URL), never the cases,
captures or score rows themselves. Files are content-addressed (named by the sha256 of what they are
made from), so a repeated batch finds its output already there and a retry never sees a half-written
file (each is written under a temporary name, then renamed; on an object store, sent in one PUT).

    <results>/batches/<sha[:2]>/<sha>.cases.jsonl   a batch of golden cases (GoldenCase JSON, one a line)
    <results>/captures/<key[:2]>/<key>.jsonl        the captures of a batch (Capture JSON, same order)
    <results>/captures/<key[:2]>/<key>.sha256       their sha256, written after them
    <results>/judged/<run>/<sha>.json               the judge's outcomes for a batch's cases (one run)
    <results>/scored/<key[:2]>/<key>/{cases,scores,labels,chunks,sentence_scores}.parquet   a scored batch;
        `_done` last, holding the row counts and each table's sha256

Nothing staged is trusted on its name: a file found again is used only when its bytes still have the
sha256 recorded when it was written (the name, for the files named by it; the `.sha256` marker or `_done`
for the others); one that does not (changed, cut short, emptied) is staged anew, with one warning naming
it. Reading a file a reference points at checks it too. A reuse touches the file (or its marker), so
`raglake gc` (raglake.pipeline.gc) can tell what was used lately."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from raglake.columnar.batch import ColumnarBatch
from raglake.errors import LakeError, LakeWriteError
from raglake.lake import objects
from raglake.lake.checks import parquet_reason, warn
from raglake.metrics.steps import StepOutcome
from raglake.schemas import CANONICAL, Capture, GoldenCase
from raglake.spool import Spool

SCORED_TABLES = ("cases", "scores", "labels", "chunks", "sentence_scores")
# staged tables are read whole, once: no column statistics (min/max over every string cost as much as the rest)
STAGED_PARQUET = {"compression": "zstd", "write_statistics": False}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Store:
    """The results location: atomic writes and reads of the staged files."""

    def __init__(self, url: str):
        self.url = url.removeprefix("file://").rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)

    def path(self, relative: str) -> str:
        return f"{self.root.rstrip('/')}/{relative}"

    @contextmanager
    def local(self, *relative: str) -> Iterator[list[str]]:
        """Local paths of these files: themselves in a local folder, else copies in a temporary folder
        (readers that take a path, e.g. pyarrow's JSON reader, then work on any fsspec store)."""
        if "file" in _protocols(self.fs):
            yield [self.path(r) for r in relative]
            return
        with tempfile.TemporaryDirectory(prefix="raglake-staged-") as folder:
            paths = [f"{folder}/{i}-{r.rsplit('/', 1)[-1]}" for i, r in enumerate(relative)]
            for r, local in zip(relative, paths):
                self.fs.get(self.path(r), local)
            yield paths

    def exists(self, relative: str) -> bool:
        return self.fs.exists(self.path(relative))

    def put(self, relative: str, data: bytes) -> str:
        """Write `data` under a temporary name, then rename it into place (readers see all or nothing);
        on an object store, in one PUT straight to its key (raglake.lake.objects: atomic, retried when the
        store throttles; over an object there, which a file staged anew replaces). Returns its sha256.
        A full disk or a read-only folder is one LakeWriteError naming the file."""
        final = self.path(relative)
        if objects.is_object_store(self.fs):
            objects.put_bytes(self.fs, final, data)  # a LakeWriteError names the file
            return sha256(data)
        folder = final.rsplit("/", 1)[0]
        tmp = f"{folder}/.{uuid.uuid4().hex[:12]}.tmp"
        try:
            self.fs.makedirs(folder, exist_ok=True)
            with self.fs.open(tmp, "wb") as f:
                f.write(data)
            self.fs.mv(tmp, final)
        except OSError as e:
            if self.fs.exists(tmp):
                self.fs.rm(tmp)
            raise LakeWriteError(f"cannot write the staged file {final}: {e.strerror or e}") from None
        return sha256(data)

    def get(self, relative: str) -> bytes:
        with self.fs.open(self.path(relative), "rb") as f:
            return f.read()

    def verified(self, relative: str, digest: str | None, what: str) -> bytes | None:
        """The file's bytes when it is there and still has sha256 `digest`; else None, with one warning
        when a file is there but does not match (`what` says what happens instead). A match is touched."""
        if digest is None or not self.exists(relative):
            return None
        data = self.get(relative)
        if sha256(data) != digest:
            warn(
                f"staged file {self.path(relative)} does not match the sha256 recorded when it was written "
                f"(changed, cut short or emptied): not used, {what}"
            )
            return None
        self.touch(relative)
        return data

    def checked(self, relative: str, digest: str | None) -> bytes:
        """The bytes of a file a reference points at, which must still have its sha256 `digest`."""
        data = self.get(relative)
        if digest is not None and sha256(data) != digest:
            raise LakeError(
                f"staged file {self.path(relative)} changed since this run wrote it (its sha256 no longer "
                "matches): run again, it is staged anew"
            )
        return data

    def touch(self, relative: str) -> None:
        """Mark a staged file as used now (its modification time: what `raglake gc` keeps by)."""
        try:
            if "file" in _protocols(self.fs):
                os.utime(self.path(relative))
            else:
                self.fs.touch(self.path(relative), truncate=False)
        except (NotImplementedError, ValueError, OSError):
            return  # a store that cannot touch: gc then goes by when the file was written

    def put_table(self, relative: str, table: pa.Table) -> str:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, **STAGED_PARQUET)
        return self.put(relative, sink.getvalue().to_pybytes())

    def get_table(self, relative: str, columns: list[str] | None = None) -> pa.Table:
        try:
            with self.fs.open(self.path(relative), "rb") as f:
                return pq.read_table(f, columns=columns)
        except (pa.ArrowException, OSError) as e:
            raise LakeError(
                f"staged file {self.path(relative)} cannot be read ({parquet_reason(e)}): run again, it is staged anew"
            ) from None


def _protocols(fs: Any) -> tuple[str, ...]:
    return fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)


@dataclass(frozen=True)
class BatchRef:
    """One batch of a run: where its cases (and, once captured, its captures and judge outcomes) lie,
    with the sha256 of each file's bytes, which the cache keys are made from."""

    results: str
    index: int
    n: int
    cases: str
    cases_key: str
    captures: str | None = None
    captures_key: str | None = None
    judged: str | None = None
    judged_key: str | None = None
    # its captures were staged by an earlier run of a deterministic target and reused, not captured by
    # this run: their latencies were measured then (the run's `captures_reused` figure says so)
    reused: bool = False

    def store(self) -> Store:
        return Store(self.results)

    def read_cases(self) -> list[GoldenCase]:
        return [
            GoldenCase.model_validate_json(line, context=CANONICAL)
            for line in staged_lines(self.store().checked(self.cases, self.cases_key))
        ]

    def case_ids(self) -> list[str]:
        """The batch's case ids, in order (a JSON parse of each line, no model)."""
        return [json.loads(line)["id"] for line in staged_lines(self.store().checked(self.cases, self.cases_key))]

    def captured(self) -> str:
        """Where the batch's captures are staged (a ValueError before they are)."""
        if self.captures is None:
            raise ValueError(f"batch {self.index} has not been captured yet")
        return self.captures

    def read_captures(self) -> list[Capture]:
        return [
            Capture.model_validate_json(line, context=CANONICAL)
            for line in staged_lines(self.store().checked(self.captured(), self.captures_key))
        ]

    def read_judged(self) -> dict[str, dict[str, StepOutcome]] | None:
        """The judge's outcomes for these cases; None when no judge was configured."""
        if self.judged is None:
            return None
        raw = json.loads(self.store().checked(self.judged, self.judged_key))
        return {cid: {step: StepOutcome(**o) for step, o in steps.items()} for cid, steps in raw.items()}

    def with_captures(self, path: str, key: str) -> BatchRef:
        return replace(self, captures=path, captures_key=key)


@dataclass(frozen=True)
class ScoredRef:
    """A scored batch: the folder of its four staged tables and how many cases and score rows it holds."""

    results: str
    index: int
    folder: str
    n_cases: int
    n_scores: int

    def table(self, name: str, columns: list[str] | None = None) -> pa.Table | None:
        """One staged table; None for `sentence_scores` of a batch staged before that table existed."""
        store = Store(self.results)
        if name == "sentence_scores" and not store.exists(f"{self.folder}/{name}.parquet"):
            return None
        return store.get_table(f"{self.folder}/{name}.parquet", columns)


def staged_lines(data: bytes) -> list[bytes]:
    """The records of a staged JSONL file (canonical JSON, one a line)."""
    return [line for line in data.split(b"\n") if line]


def jsonl(models: Sequence[Any]) -> bytes:
    """Models as canonical JSON lines (`model_dump_json()`, one a line): what every staged file holds."""
    return b"".join(m.model_dump_json().encode() + b"\n" for m in models)


def stage_cases(results: str, cases: Sequence[GoldenCase], batch_size: int) -> list[BatchRef]:
    """Write the golden cases batch by batch (content-addressed) and return a reference to each."""
    store, refs = Store(results), []
    for index, start in enumerate(range(0, len(cases), batch_size)):
        stop = min(len(cases), start + batch_size)
        # a Spool holds the canonical lines already: they are copied, not parsed and written again
        data = cases.raw(start, stop) if isinstance(cases, Spool) else jsonl(cases[start:stop])
        key = sha256(data)
        path = f"batches/{key[:2]}/{key}.cases.jsonl"
        if store.verified(path, key, "written again") is None:
            store.put(path, data)
        refs.append(BatchRef(store.url, index, stop - start, path, key))
    return refs


def stage_pairs(
    results: str, cases: Sequence[GoldenCase], captures: Sequence[Capture], batch_size: int, source: str
) -> list[BatchRef]:
    """Stage cases and their captures (already at hand, e.g. a stored run's) batch by batch; `source`
    names where the captures came from and goes into their content key."""
    refs = stage_cases(results, cases, batch_size)
    return [
        stage_captures(ref, sha256(f"{source}|{ref.cases_key}".encode()), captures[i : i + ref.n])
        for ref, i in zip(refs, range(0, len(cases), batch_size))
    ]


def stage_captures(batch: BatchRef, key: str, captures: Sequence[Capture] | bytes) -> BatchRef:
    """Write a batch's captures (models, or their canonical JSON lines) under their content key `key`
    (see raglake.pipeline.plan.capture_key)."""
    data = captures if isinstance(captures, bytes) else jsonl(captures)
    path, store = captured_path(key), batch.store()
    digest = store.put(path, data)
    store.put(captured_marker(key), digest.encode())  # last: captures without it are never reused
    return batch.with_captures(path, digest)


def captured_path(key: str) -> str:
    return f"captures/{key[:2]}/{key}.jsonl"


def captured_marker(key: str) -> str:
    """The captures' sha256, written after them."""
    return f"captures/{key[:2]}/{key}.sha256"


def staged_captures(batch: BatchRef, key: str) -> BatchRef | None:
    """The batch with the captures an earlier attempt staged under `key` (their bytes still those whose
    sha256 the marker holds), or None."""
    path, marker, store = captured_path(key), captured_marker(key), batch.store()
    if not store.exists(marker):
        return None  # never finished (or staged before the markers): captured again
    digest = store.get(marker).decode("ascii", "replace").strip()
    if store.verified(path, digest, "captured again") is None:
        return None
    store.touch(marker)
    return batch.with_captures(path, digest)


def stage_judged(batch: BatchRef, run_id: str, outcomes: dict[str, dict[str, StepOutcome]]) -> BatchRef:
    """Write the judge's outcomes for the batch's cases (one run's) and point the batch at them."""
    data = json.dumps(
        {cid: {step: asdict(o) for step, o in steps.items()} for cid, steps in outcomes.items()},
        sort_keys=True,
        default=str,
    ).encode()
    key = sha256(data)
    path = f"judged/{run_id}/{key}.json"
    store = batch.store()
    if store.verified(path, key, "written again") is None:
        store.put(path, data)
    return replace(batch, judged=path, judged_key=key)


def iter_columnar(batches: Sequence[BatchRef]) -> Iterator[ColumnarBatch]:
    """Every captured batch's cases and captures as columns, one batch in memory at a time (no model is
    built: reading 20,000 cases this way took 0.5 s against 4-5 s for their pydantic models)."""
    for batch in batches:
        with batch.store().local(batch.cases, batch.captured()) as (cases_path, captures_path):
            yield ColumnarBatch.from_files(cases_path, captures_path, canonical=True)


def iter_pairs(batches: Sequence[BatchRef]) -> Iterator[tuple[GoldenCase, Capture]]:
    """Every (case, capture) of the batches, one batch in memory at a time."""
    for batch in batches:
        yield from zip(batch.read_cases(), batch.read_captures())


def scored_folder(key: str) -> str:
    return f"scored/{key[:2]}/{key}"


def find_scored(results: str, index: int, key: str) -> ScoredRef | None:
    """The scored batch an earlier run or attempt staged under `key`: complete (`_done` is written last)
    and every table still the bytes whose sha256 `_done` holds; else None (it is scored again)."""
    store, folder = Store(results), scored_folder(key)
    if not store.exists(f"{folder}/_done"):
        return None
    try:
        done = json.loads(store.get(f"{folder}/_done"))
        digests = done.get("sha256") or {}
    except (ValueError, AttributeError):
        done, digests = {}, {}
    counts_ok = all(isinstance(done.get(n), int) for n in ("cases", "scores"))
    if sorted(digests) != sorted(SCORED_TABLES) or not counts_ok:  # staged before the digests, or a damaged marker
        return None
    for name in SCORED_TABLES:
        if store.verified(f"{folder}/{name}.parquet", digests[name], "the batch is scored again") is None:
            return None
    store.touch(f"{folder}/_done")
    return ScoredRef(store.url, index, folder, done["cases"], done["scores"])


def stage_scored(results: str, index: int, key: str, tables: dict[str, pa.Table]) -> ScoredRef:
    """Write a scored batch's tables, then its `_done` marker with the row counts and each table's sha256."""
    store, folder = Store(results), scored_folder(key)
    digests = {name: store.put_table(f"{folder}/{name}.parquet", tables[name]) for name in SCORED_TABLES}
    counts = {"cases": tables["cases"].num_rows, "scores": tables["scores"].num_rows}
    store.put(f"{folder}/_done", json.dumps({**counts, "sha256": digests}).encode())
    return ScoredRef(store.url, index, folder, counts["cases"], counts["scores"])
