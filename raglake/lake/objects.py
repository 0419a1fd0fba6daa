"""Writing a whole file to an object store (S3, GCS, Azure Blob, memory://): once, straight to its final key.

An object store has no rename: fsspec's `mv` is a copy plus a delete, so a temp name then a rename wrote
every byte twice. A PUT is atomic instead (readers see the whole object or none), and so is a multipart
upload, which the store shows only once it is completed (s3fs uploads in parts of PART_BYTES from twice
that size; an abandoned one, a process killed mid-upload, is never listed: a bucket lifecycle rule
`AbortIncompleteMultipartUpload` reclaims its parts). So a file is finished first (in memory, or in a local
temporary file for a streamed lake file), then sent in one request, or one multipart upload.

Create-only: on S3 (`s3://`, `s3a://`) the request carries `If-None-Match: *`, which the store refuses
(412) when the key exists: of two writers of one key exactly one wins, with nothing overwritten. Elsewhere
an existence check comes first, and two writers that both pass it before either writes race: the later
PUT replaces the earlier (each object is still whole). So too on an S3-compatible store that answers the
header 501 Not Implemented (then the check is made, and the PUT sent without it), or that ignores it.
raglake never has two writers of one key but two processes landing one run id, which
raglake.lake.landing detects after the fact.

Throttling (503 SlowDown), 500s and dropped connections are retried here, at this edge, with the
project's backoff (raglake.retrying.Backoff), on top of the S3 client's own few retries: each attempt
sends the whole file again, which only a finished file allows. A 412 on a retried create is checked
against the bytes sent: an earlier attempt whose answer was lost did land them."""

from __future__ import annotations

import errno
import hashlib
import os
import time
from collections.abc import Callable
from typing import Any

from raglake.errors import LakeError, LakeWriteError
from raglake.retrying import Backoff

OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory"})
CONDITIONAL = frozenset({"s3", "s3a"})  # PUT with If-None-Match: * (AWS S3 since 2024, MinIO, moto)
PART_BYTES = 50 * 2**20  # a multipart upload's part size (s3fs's default); from twice this, a file goes in parts
BACKOFF = Backoff(retries=6, base_s=0.2, max_s=10.0)
# what a store answers when it is busy or failing for a moment (s3fs turns SlowDown, 503 and 409 into
# EBUSY, 500 InternalError into EREMOTEIO); anything else (403, 404, a full bucket) is not retried
_TRANSIENT_ERRNOS = frozenset(
    {errno.EBUSY, getattr(errno, "EREMOTEIO", errno.EIO), errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET}
)
_Sent = tuple[int, Callable[[], str]]
_TRANSIENT_WORDS = (
    "SlowDown",
    "reduce your request rate",
    "InternalError",
    "ServiceUnavailable",
    "Service Unavailable",
)


def protocols(fs: Any) -> tuple[str, ...]:
    return fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)


def is_object_store(fs: Any) -> bool:
    """Whether `fs` stores objects (no rename; a PUT is atomic) rather than files in folders."""
    return bool(OBJECT_STORES.intersection(protocols(fs)))


def conditional(fs: Any) -> bool:
    """Whether a create-only write is refused by the store itself when the key exists (If-None-Match)."""
    return bool(CONDITIONAL.intersection(protocols(fs)))


def transient(e: BaseException) -> bool:
    """Whether another attempt may succeed: the store is throttling, failing for a moment or unreachable."""
    if isinstance(e, FileExistsError | FileNotFoundError | PermissionError):
        return False
    if isinstance(e, TimeoutError | ConnectionError):
        return True
    if isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS:
        return True
    return any(word in str(e) for word in _TRANSIENT_WORDS)


def put_bytes(fs: Any, final: str, data: bytes, *, create: bool = False, backoff: Backoff | None = None) -> None:
    """Write `data` as the object `final` in one request (a multipart upload when large); with `create`,
    never over an existing object (a LakeError when one is there)."""

    def attempt(mode: str) -> None:
        fs.pipe_file(final, data, mode=mode, **_part_size(fs))

    _send(fs, final, attempt, create, (len(data), lambda: hashlib.sha256(data).hexdigest()), backoff)


def put_file(fs: Any, local: str, final: str, *, create: bool = False, backoff: Backoff | None = None) -> None:
    """Upload the finished local file `local` as the object `final` (one PUT, or a multipart upload from
    twice PART_BYTES); with `create`, never over an existing object."""

    def attempt(mode: str) -> None:
        fs.put_file(local, final, mode=mode, **_part_size(fs))

    _send(fs, final, attempt, create, (os.path.getsize(local), lambda: _file_sha256(local)), backoff)


def _part_size(fs: Any) -> dict[str, int]:
    return {"chunksize": PART_BYTES} if conditional(fs) else {}


def _send(
    fs: Any, final: str, attempt: Callable[[str], None], create: bool, sent: _Sent, backoff: Backoff | None
) -> None:
    """Make attempts until one lands the object or an error is not transient (or retries run out). `sent`:
    the size of what is sent and how to get its sha256 (to tell our own object from another writer's)."""
    if create and not conditional(fs) and fs.exists(final):
        raise LakeError(f"{fs.unstrip_protocol(final)} already exists; the lake is append-only")
    mode = "create" if create and conditional(fs) else "overwrite"
    backoff = backoff or BACKOFF
    for retry in range(backoff.retries + 1):
        try:
            attempt(mode)
            return
        except FileExistsError as e:
            if (retry or _client_retried(e)) and _holds(fs, final, sent):
                return  # an earlier attempt (ours, or the S3 client's own retry) landed it; its answer was lost
            raise LakeError(f"{fs.unstrip_protocol(final)} already exists; the lake is append-only") from None
        except (OSError, TimeoutError) as e:
            if mode == "create" and getattr(e, "errno", None) == errno.ENOSYS:  # 501: no If-None-Match here
                if fs.exists(final):
                    raise LakeError(f"{fs.unstrip_protocol(final)} already exists; the lake is append-only") from None
                mode = "overwrite"  # guarded by the existence check, as on other stores
                continue
            if not transient(e) or retry == backoff.retries:
                tries = f" after {retry + 1} attempts" if retry else ""
                raise LakeWriteError(f"cannot write {fs.unstrip_protocol(final)}{tries}: {e}") from None
        time.sleep(backoff.delay(retry + 1))


def _client_retried(e: BaseException) -> bool:
    """Whether the S3 client itself sent the request more than once (botocore's RetryAttempts)."""
    response = getattr(e.__cause__, "response", None) or {}
    return bool(response.get("ResponseMetadata", {}).get("RetryAttempts"))


def _holds(fs: Any, final: str, sent: _Sent) -> bool:
    """Whether the object `final` holds exactly the bytes sent (its size, then its sha256)."""
    size, digest = sent
    if fs.info(final).get("size") != size:
        return False
    h = hashlib.sha256()
    with fs.open(final, "rb") as f:
        while chunk := f.read(8 * 2**20):
            h.update(chunk)
    return h.hexdigest() == digest()


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * 2**20):
            h.update(chunk)
    return h.hexdigest()
