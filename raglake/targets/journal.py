"""A run's capture journal: every capture a live target returns is appended as one JSON line, so a
run that is killed and started again with the same run id requests only the cases still missing."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
from pathlib import Path

from pydantic import ValidationError

from raglake.errors import LakeWriteError
from raglake.schemas import CANONICAL, Capture, GoldenCase

# appended to, created when missing, never through a link (a planted one would receive every capture)
APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def case_key(case: GoldenCase, scope: str = "") -> str:
    """The case content and the target settings (`scope`) a capture answers: a changed question, or the
    same run id retried with another --k, is asked again."""
    content = case.model_dump_json(include={"id", "question", "category", "difficulty", "vault", "tags"})
    return hashlib.sha256(f"{scope}\n{content}".encode()).hexdigest()[:16]


class CaptureJournal:
    def __init__(self, path: str | Path, scope: str = ""):
        """`scope`: the target's content key (its config and k)."""
        self.path = Path(path)
        self.scope = scope
        self._lock = threading.Lock()

    def load(self) -> dict[str, tuple[str, Capture]]:
        """case id -> (case key, capture); a line cut short by a kill is ignored."""
        found: dict[str, tuple[str, Capture]] = {}
        if self.path.is_symlink():
            raise self._a_link()
        if not self.path.exists():
            return found
        # b"\n" only: splitlines() would also cut at U+2028, U+0085 and the like inside a JSON string
        for line in self.path.read_bytes().split(b"\n"):
            try:
                entry = json.loads(line.decode("utf-8"))
                capture = Capture.model_validate(entry["capture"], context=CANONICAL)  # a model's dump
            except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValidationError):
                continue  # the tail of an interrupted write (possibly cut inside a character)
            found[capture.case_id] = (entry["case_key"], capture)
        return found

    def completed(self, cases: list[GoldenCase]) -> dict[str, Capture]:
        """Captures already journalled for these cases (same case content)."""
        stored = self.load()
        return {c.id: stored[c.id][1] for c in cases if c.id in stored and stored[c.id][0] == case_key(c, self.scope)}

    def append(self, case: GoldenCase, capture: Capture) -> None:
        line = json.dumps(
            {"case_key": case_key(case, self.scope), "capture": capture.model_dump(mode="json")}, ensure_ascii=False
        )
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, APPEND, 0o666)  # the umask applies
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise self._a_link() from None
                raise
            with os.fdopen(fd, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()

    def _a_link(self) -> LakeWriteError:
        return LakeWriteError(
            f"the capture journal {self.path} is a symbolic link: not followed (remove it, or give another --run-id)"
        )
