"""Writing a file the user named (`report -o`, `import --out-dir`, `metaeval --export`): where asked and
nowhere else, whole or not at all.

The target must be absent or a regular file: a folder, a device, a FIFO or a socket is refused (`-` is
standard output), and so is a symbolic link: it is never followed nor replaced. The text goes into a
temporary file created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) inside a private folder (mkdtemp: a
fresh, unpredictable name, mode 0700) beside the target, so nothing planted beside the target can
redirect the write and nobody else can open the file while it is written; it is flushed to disk, given
the mode of the file it replaces (else a new file's), the target is checked again, and a rename publishes
it: a reader (or a full disk) sees the old file or the new one, never a part, and a hard link at the
target is replaced rather than written through. Any failure removes the temporary folder and raises one
ConfigError naming the target."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from raglake.errors import ConfigError

STDOUT = "-"
_KINDS = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
}


def is_stdout(path: str | Path) -> bool:
    return str(path) == STDOUT


def check_target(path: str | Path, what: str) -> Path:
    """`path` as a place to write `what` ("the report"), checked before any work: its folder exists, and
    the path is absent or a regular file, not a link; ConfigError otherwise. `-` passes (standard output)."""
    path = Path(path)
    if is_stdout(path):
        return path
    problem = _problem(path)
    if problem:
        raise ConfigError(f"cannot write {what} to {path}: {problem}")
    return path


def _problem(path: Path) -> str | None:
    folder = path.parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist" if not folder.exists() else f"{folder} is not a folder"
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISLNK(found.st_mode):
        return (
            f"it is a symbolic link (to {os.readlink(path)}); raglake never writes through a link: "
            f"give the file's own path, or remove the link"
        )
    if stat.S_ISDIR(found.st_mode):
        return f"it is a folder; give a file name (e.g. {path / 'report.html'})"
    if not stat.S_ISREG(found.st_mode):
        kind = _KINDS.get(stat.S_IFMT(found.st_mode), "not a regular file")
        return f"it is {kind}, not a regular file; give a file name, or -o - for standard output"
    return None


def write_text(path: str | Path, text: str, what: str) -> Path:
    """Write `text` (UTF-8) to `path` as the module says; `-`: to standard output."""
    with writing(path, what) as f:
        f.write(text)
    return Path(path)


@contextlib.contextmanager
def writing(path: str | Path, what: str) -> Iterator[IO[str]]:
    """A text file (UTF-8) to write `what` into; published at `path` when the block ends without an
    error (`-`: standard output, written as it comes)."""
    path = Path(path)
    if is_stdout(path):
        with _stdout(what) as f:
            yield f
        return
    check_target(path, what)
    try:
        folder = tempfile.mkdtemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise _failed(what, path, e) from None
    try:
        tmp = os.path.join(folder, "partial")
        with _temp_file(tmp, path) as f:
            yield f
        problem = _problem(path)  # again: something may have been put there meanwhile
        if problem:
            raise ConfigError(f"cannot write {what} to {path}: {problem}")
        os.replace(tmp, path)
    except OSError as e:
        raise _failed(what, path, e) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the temporary folder, with whatever it still holds


@contextlib.contextmanager
def _temp_file(tmp: str, path: Path) -> Iterator[IO[str]]:
    """The exclusive temporary file, closed (written through, flushed to disk, its final mode set) after the block."""
    try:
        mode = stat.S_IMODE(os.lstat(path).st_mode)  # the mode of the file it replaces
    except FileNotFoundError:
        mode = None
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)  # umask applies
    buffer = _FdWriter(fd)
    f = io.TextIOWrapper(io.BufferedWriter(buffer, 1 << 20), encoding="utf-8", newline="\n")
    try:
        yield f
        f.flush()
        if mode is not None:
            os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        buffer.closed_fd = True  # the wrapper's close must not write again after a failed write
        os.close(fd)


class _FdWriter(io.RawIOBase):
    """Raw writes to a file descriptor, through _write_all (every byte, or an OSError)."""

    def __init__(self, fd: int):
        self.fd, self.closed_fd = fd, False

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        if self.closed_fd:
            return len(data)
        _write_all(self.fd, bytes(data))
        return len(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def _stdout(what: str) -> Iterator[IO[str]]:
    """Standard output as UTF-8 text, after what was printed there before."""
    stream = getattr(sys.stdout, "buffer", None)
    f = io.TextIOWrapper(stream, encoding="utf-8", newline="\n", write_through=True) if stream else sys.stdout
    try:
        sys.stdout.flush()
        yield f
        f.flush()
    except OSError as e:  # a closed pipe, a full device
        raise ConfigError(f"cannot write {what} to standard output: {e.strerror or e}") from None
    finally:
        if f is not sys.stdout:
            f.detach()  # leaves sys.stdout's own buffer open


def _failed(what: str, path: Path, e: OSError) -> ConfigError:
    return ConfigError(f"cannot write {what} to {path}: {e.strerror or e}")
