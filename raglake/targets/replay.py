"""The replay target: captures read from a JSONL/JSON/YAML file, or from an earlier run in the lake."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

from raglake.errors import ConfigError, InputError, UnknownNameError, did_you_mean
from raglake.golden import GoldenSet, spool_captures
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.schemas import CANONICAL, Capture, GoldenCase
from raglake.targets.base import safe_name


def _missing(case: GoldenCase, where: str) -> Capture:
    return _missing_id(case.id, where)


def _missing_id(case_id: str, where: str) -> Capture:
    return Capture(case_id=case_id, status="error", error=f"no capture for this case in {where}")


class _ReplayBase:
    kind = "replay"
    spec = name = ""
    deterministic = True

    def __init__(self) -> None:
        self._by_id: dict[str, Capture] = {}

    def capture(self, cases: list[GoldenCase], journal: object = None) -> list[Capture]:
        return [self._by_id.get(c.id) or _missing(c, self.spec) for c in cases]

    def known_docs(self) -> frozenset[str]:
        return frozenset()

    def manifest(self) -> None:
        return None

    def _name_from_methods(self, fallback: str) -> str:
        methods = Counter(c.method for c in self._by_id.values() if c.method)
        return safe_name(methods.most_common(1)[0][0]) if methods else safe_name(fallback)


class ReplayFile(_ReplayBase):
    """`replay:FILE`: one capture per line (raglake's capture format, or a seed-003/RAGAS file). The
    captures are validated into a Spool (raglake.golden.spool_captures): memory holds offsets and ids, not
    captures."""

    def __init__(self, path: str):
        super().__init__()
        self.path = Path(path)
        self.spec = f"replay:{path}"
        spool, methods = spool_captures(self.path)
        self._spool = spool
        self.name = safe_name(methods.most_common(1)[0][0]) if methods else safe_name(self.path.stem)
        self._hash = file_sha256(self.path)[:16]

    def content_key(self) -> str:
        return f"replay-file:{self._hash}"

    def capture(self, cases: list[GoldenCase], journal: object = None) -> list[Capture]:
        return [self._spool.get(c.id) or _missing(c, self.spec) for c in cases]

    def capture_lines(self, case_ids: list[str]) -> bytes:
        """The captures of these cases as canonical JSON lines, copied from the spool (no parsing): what
        `capture` gives, ready to stage."""
        spool = self._spool
        out = []
        for case_id in case_ids:
            position = spool.position(case_id)
            found = spool.raw(position, position + 1) if position is not None else None
            out.append(found or _missing_id(case_id, self.spec).model_dump_json().encode() + b"\n")
        return b"".join(out)

    def check(self, golden: GoldenSet) -> None:
        """Captures of cases the golden set lacks are fine when the golden set is a subset of the file
        (evaluating a slice); when golden cases are missing too, an unknown id is a mismatch or a typo."""
        spool = self._spool
        known = golden.ids()
        if all(spool.position(case_id) is not None for case_id in known):
            return
        known_set = set(known)
        for position, case_id in enumerate(spool.ids):
            if case_id not in known_set:
                raise InputError(
                    str(self.path),
                    spool.line(position),
                    "case_id",
                    f"no case {case_id!r} in golden set {golden.path}{did_you_mean(case_id, known)}",
                )


def file_sha256(path: Path) -> str:
    """The file's sha256, read a few MB at a time."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


class ReplayRun(_ReplayBase):
    """`replay-run:RUN_ID`: the captures an earlier run landed in the lake (no target is called)."""

    kind = "replay-run"

    def __init__(self, run_id: str, lake: Lake):
        super().__init__()
        self.run_id, self.spec = run_id, f"replay-run:{run_id}"
        con = connect(lake)
        runs = [r[0] for r in fetch(con, "SELECT run_id FROM runs")]
        if run_id not in runs:
            raise UnknownNameError("run", run_id, runs)
        cases = con.sql("SELECT * FROM cases WHERE run_id = $r ORDER BY case_id", params={"r": run_id})
        chunks = con.sql("SELECT * FROM chunks WHERE run_id = $r ORDER BY case_id, rank", params={"r": run_id})
        by_case: dict[str, list[dict]] = {}
        for ch in chunks.to_arrow_table().to_pylist():
            by_case.setdefault(ch["case_id"], []).append(
                {k: ch[k] for k in ("rank", "rel_path", "heading_path", "text", "score", "chunk_id")}
            )
        for row in cases.to_arrow_table().to_pylist():
            self._by_id[row["case_id"]] = _capture_from_row(row, by_case.get(row["case_id"], []))
        self.name = self._name_from_methods(run_id)
        digest = hashlib.sha256()
        for cid in sorted(self._by_id):
            digest.update(self._by_id[cid].model_dump_json().encode())
        self._hash = digest.hexdigest()[:16]

    def content_key(self) -> str:
        return f"replay-run:{self._hash}"

    def check(self, golden: GoldenSet) -> None:
        unknown = sorted(set(self._by_id) - set(golden.ids()))
        if unknown:
            raise ConfigError(
                f"run {self.run_id} holds captures for {len(unknown)} case(s) not in {golden.path}, e.g. {unknown[0]!r}"
            )


def _capture_from_row(row: dict, chunks: list[dict]) -> Capture:
    """The capture a run landed, from its `cases` row and `chunks` rows: their anchors are the model's normal
    values (headings as "A > B"), taken as they are (CANONICAL), not normalised a second time."""
    latency = {s: row[f"latency_{s}_ms"] for s in ("folder_selection", "retrieval", "generation", "total", "wall")}
    fields = {
        "case_id": row["case_id"],
        "answer": row["answer"] or "",
        "abstained": row["abstained"],
        "references": row["reference_list"] or [],
        "retrieved": chunks,
        "method": row["method"],
        "status": row["capture_status"],
        "error": row["capture_error"],
        "latency_ms": latency,
        "folder_mode": row["folder_mode"],
        "selected_folders": row["selected_folders"] or [],
        "attempts": row.get("capture_attempts"),
        "cost_usd": row.get("cost_usd"),
    }
    return Capture.model_validate(fields, context=CANONICAL)
