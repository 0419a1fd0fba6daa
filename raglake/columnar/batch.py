"""A batch of cases as columns: golden cases and their captures, row for row, with the pydantic models
of a row built only when something asks for them."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa

from raglake.columnar.anchors import codes
from raglake.columnar.arrays import combine
from raglake.columnar.captures import CaptureColumns, captures_from_models, read_capture_columns
from raglake.columnar.golden import GoldenColumns, golden_from_models, read_golden_columns
from raglake.columnar.lines import Lines, read_lines
from raglake.schemas import Capture, GoldenCase


@dataclass
class ColumnarBatch:
    golden: GoldenColumns
    captures: CaptureColumns
    _models: dict[int, tuple[GoldenCase, Capture]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if len(self.golden) != len(self.captures):
            raise ValueError(
                f"{self.golden.lines.path} holds {len(self.golden)} cases but "
                f"{self.captures.lines.path} {len(self.captures)} captures"
            )

    @classmethod
    def from_files(cls, cases_path: str | Path, captures_path: str | Path, *, canonical: bool = False) -> ColumnarBatch:
        """Two JSONL files in raglake's shape, one golden case and one capture a line, in the same order
        (read side by side: pyarrow's reader leaves the GIL). `canonical`: staged files of models' dumps,
        whose values are taken as they are (raglake.columnar.golden.read_golden_columns)."""
        with ThreadPoolExecutor(max_workers=2) as pool:
            golden = pool.submit(read_golden_columns, cases_path, canonical=canonical)
            captures = pool.submit(read_capture_columns, captures_path, canonical=canonical)
            return cls(golden.result(), captures.result())

    @classmethod
    def from_models(cls, pairs: Sequence[tuple[GoldenCase, Capture]]) -> ColumnarBatch:
        cases, captures = [p[0] for p in pairs], [p[1] for p in pairs]
        return cls(golden_from_models("<cases>", cases), captures_from_models("<captures>", captures))

    def __len__(self) -> int:
        return len(self.golden)

    def file_lines(self, cases_path: str | Path, captures_path: str | Path) -> tuple[Lines, Lines]:
        """The record lines of the two files the batch was read from: the bulk read's, or the files' own read
        again where the per-record path made the columns from models' dumps (which are not the lines)."""
        # read once already (and held to the line limit then, where they are inputs)
        golden = self.golden.lines if self.golden.models is None else read_lines(cases_path, limit=False)
        captures = self.captures.lines if self.captures.models is None else read_lines(captures_path, limit=False)
        return golden, captures

    @cached_property
    def case_ids(self) -> pa.Array:
        return combine(self.golden.cases.column("id"))

    def pair(self, row: int) -> tuple[GoldenCase, Capture]:
        """The row's models (built from its lines the first time)."""
        if row not in self._models:
            self._models[row] = (self.golden.model(row), self.captures.model(row))
        return self._models[row]

    def pairs(self) -> list[tuple[GoldenCase, Capture]]:
        return [self.pair(i) for i in range(len(self))]

    @cached_property
    def path_codes(self) -> dict[str, np.ndarray]:
        """rel_path codes, comparable across chunks, supports, references and chunk labels."""
        parts = {
            "chunks": self.captures.chunks,
            "supports": self.golden.supports,
            "references": self.captures.references,
            "chunk_labels": self.golden.chunk_labels,
        }
        found = codes(*(p.column("rel_path") for p in parts.values()))
        return dict(zip(parts, found))
