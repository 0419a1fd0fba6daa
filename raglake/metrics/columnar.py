"""Case-level metrics over a whole batch at once (raglake.columnar): what a metric's vectorised form
(registry.columnar_form) sees, and the arrays it returns. A form may leave rows to the metric's own
function (`Column.defer`): those rows get CaseContexts built from their records, so every value, status,
reason and label source is the per-case function's."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar import normalise as norm
from raglake.columnar.anchors import anchor_pairs, snippets_found
from raglake.columnar.arrays import combine, group_starts, to_numpy
from raglake.columnar.batch import ColumnarBatch
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import STATUSES, Score
from raglake.schemas import FAILED_STATUSES

OK, UNDEFINED, SKIPPED = STATUSES.index("ok"), STATUSES.index("undefined"), STATUSES.index("skipped")
SCORE_META = ("model", "judge_model", "prompt_id", "prompt_version", "judge_call")  # Score fields beyond the label's
_NEUMAIER = sys.version_info >= (3, 12)  # the float sum() of Python 3.12+ is compensated


class Column:
    """One metric's scores for a batch: value (NaN unless ok), status, reason and label source per case."""

    def __init__(self, n: int):
        self.value = np.full(n, np.nan)
        self.status = np.full(n, -1, dtype=np.int8)
        self.reason = np.full(n, -1, dtype=np.int32)  # index in vocab, -1: None
        self.source = np.full(n, -1, dtype=np.int32)
        self.vocab: list[str] = []
        self._codes: dict[str, int] = {}
        self.deferred = np.zeros(n, dtype=bool)
        self.meta: dict[str, np.ndarray] = {}  # SCORE_META fields, set by score() only
        self.details: dict[int, tuple] = {}  # row -> Score.detail (per-sentence scores), set by score() only

    def code(self, text: str | None) -> int:
        if text is None:
            return -1
        if text not in self._codes:
            self._codes[text] = len(self.vocab)
            self.vocab.append(text)
        return self._codes[text]

    def ok(self, rows: np.ndarray, values: Any, source: str | None = None) -> None:
        self.value[rows] = values if np.ndim(values) == 0 else np.asarray(values, dtype=np.float64)[rows]
        self.status[rows], self.reason[rows], self.source[rows] = OK, -1, self.code(source)

    def sources(self, rows: np.ndarray, codes: np.ndarray, vocab: list[str]) -> None:
        """Label sources per row: codes into `vocab` (-1: None)."""
        mapped = np.array([self.code(v) for v in vocab] + [-1], dtype=np.int32)
        self.source[rows] = mapped[codes[rows]]

    def failed(self, rows: np.ndarray, status: int, reason: str) -> None:
        self.value[rows], self.status[rows] = np.nan, status
        self.reason[rows], self.source[rows] = self.code(reason), -1

    def undefined(self, rows: np.ndarray, reason: str) -> None:
        self.failed(rows, UNDEFINED, reason)

    def reasons(self, rows: np.ndarray, texts: list[str]) -> None:
        """`undefined` with a reason of its own per row (rows as indexes)."""
        self.undefined(rows, "")
        self.reason[rows] = [self.code(t) for t in texts]

    def defer(self, rows: np.ndarray) -> None:
        self.deferred[rows] = True

    def score(self, row: int, score: Score) -> None:
        """One row from the metric's own function (every field of the Score)."""
        self.value[row], self.status[row] = score.value, STATUSES.index(score.status)
        self.reason[row], self.source[row] = self.code(score.reason), self.code(score.source)
        for name in SCORE_META:
            value = getattr(score, name)
            if value is not None:
                if name not in self.meta:
                    self.meta[name] = np.full(len(self.value), -1, dtype=np.int32)
                self.meta[name][row] = self.code(value)
        if score.detail:
            self.details[row] = score.detail
        self.deferred[row] = False


def ordered_sums(parent: np.ndarray, terms: np.ndarray, n: int) -> np.ndarray:
    """Per group, the float sum() Python computes over the group's terms in their order (parent sorted):
    left to right, compensated as CPython does from 3.12. Zero terms change nothing."""
    total, comp = np.zeros(n), np.zeros(n)
    if not len(parent):
        return total
    position = np.arange(len(parent)) - group_starts(parent, n)[parent]
    for p in range(int(position.max()) + 1):
        at = position == p
        rows, x = parent[at], terms[at]
        if _NEUMAIER:
            f = total[rows]
            t = f + x
            comp[rows] += np.where(np.abs(f) >= np.abs(x), (f - t) + x, (x - t) + f)
            total[rows] = t
        else:
            total[rows] += x
    if _NEUMAIER:
        fix = (comp != 0) & np.isfinite(comp)
        total[fix] += comp[fix]
    return total


def discounts(k: int, top_rank: int) -> np.ndarray:
    """math.log2(r + 1) for r = 0..max(k, top_rank) (index r), as dcg() computes it."""
    return np.array([math.log2(r + 1) if r else 1.0 for r in range(max(k, top_rank) + 1)])


def gains(grades: np.ndarray) -> np.ndarray:
    return np.power(2.0, grades) - 1.0


class BatchContext:
    """The batch, the run's scoring settings and what several metrics read, worked out once per batch."""

    def __init__(
        self,
        batch: ColumnarBatch,
        config: ScoringConfig,
        *,
        known_docs: frozenset[str] = frozenset(),
        judge: dict[str, dict[str, Any]] | None = None,
    ):
        self.batch, self.config, self.known_docs, self.judge = batch, config, known_docs, judge
        self.n, self.k = len(batch), config.k
        self.golden, self.captures = batch.golden, batch.captures
        self._contexts: dict[int, CaseContext] = {}
        self._cache: dict[str, Any] = {}
        self.encoder: Any = None  # the run's TextEncoder (raglake.embed.cache), which the vector forms read
        self._embeddings: Any = None
        self._make_embeddings: Callable[[], Any] | None = None

    @property
    def embeddings(self) -> Any:
        """The batch's EmbeddingInputs for the metrics scored per case (and rows a form leaves to its
        metric), made on first use: the models and vectors they need cost nothing when no row asks."""
        if self._embeddings is None and self._make_embeddings is not None:
            self._embeddings, self._make_embeddings = self._make_embeddings(), None
        return self._embeddings

    @embeddings.setter
    def embeddings(self, value: Any) -> None:
        self._embeddings, self._make_embeddings = value, None

    def embeddings_when_asked(self, make: Callable[[], Any]) -> None:
        self._embeddings, self._make_embeddings = None, make

    def with_config(self, config: ScoringConfig) -> BatchContext:
        """The same batch at other scoring settings (a metric variant's): nothing worked out is shared."""
        other = BatchContext(self.batch, config, known_docs=self.known_docs, judge=self.judge)
        other.encoder = self.encoder
        other._embeddings, other._make_embeddings = self._embeddings, self._make_embeddings
        return other

    def context(self, row: int) -> CaseContext:
        """The CaseContext the per-case path builds for this row."""
        if row not in self._contexts:
            case, capture = self.batch.pair(row)
            judge = None if self.judge is None else self.judge.get(case.id, {})
            self._contexts[row] = CaseContext(
                case, capture, self.config, known_docs=self.known_docs, embeddings=self.embeddings, judge=judge
            )
        return self._contexts[row]

    def case_column(self, name: str) -> pa.Array:
        return self.cached(f"case.{name}", lambda: combine(self.golden.cases.column(name)))

    def capture_column(self, name: str) -> pa.Array:
        return self.cached(f"capture.{name}", lambda: combine(self.captures.captures.column(name)))

    # ---- per case ------------------------------------------------------------------------------------

    @cached_property
    def failed(self) -> np.ndarray:
        return norm.mask(pc.is_in(self.capture_column("status"), pa.array(FAILED_STATUSES)))

    @cached_property
    def answerable(self) -> np.ndarray:
        return norm.mask(self.case_column("answerable"))

    @cached_property
    def n_supports(self) -> np.ndarray:
        return np.bincount(self.golden.supports.parent, minlength=self.n)

    @cached_property
    def support_start(self) -> np.ndarray:
        return group_starts(self.golden.supports.parent, self.n)

    @cached_property
    def answers(self) -> pa.Array:
        return self.capture_column("answer")

    # ---- retrieved chunks and the supports they match -----------------------------------------------

    @cached_property
    def chunk_case(self) -> np.ndarray:
        return self.captures.chunks.parent

    @cached_property
    def chunk_rank(self) -> np.ndarray:
        return to_numpy(self.captures.chunks.column("rank"), 0, np.int64)

    @cached_property
    def top(self) -> np.ndarray:
        """The chunk is within the top K (rank ≤ K)."""
        return self.chunk_rank <= self.k

    @cached_property
    def matches(self) -> tuple[np.ndarray, np.ndarray]:
        """(chunk, support) of every retrieved chunk (beyond K too) and gold support it matches; supports
        as indexes of golden.supports; with require_snippets the chunk must hold one of the support's snippets."""
        chunks, supports = self.captures.chunks, self.golden.supports
        codes = self.batch.path_codes
        ci, si = anchor_pairs(
            chunks.parent,
            codes["chunks"],
            chunks.column("heading"),
            supports.parent,
            codes["supports"],
            supports.column("heading"),
        )
        if self.config.require_snippets and len(ci):
            snippets = supports.column("snippets")
            has = np.asarray(pc.list_value_length(snippets))[si] > 0
            rows = np.flatnonzero(has)
            if len(rows):
                texts = chunks.table.column("text").take(pa.array(ci[rows])).to_pylist()
                found = snippets_found(texts, snippets.take(pa.array(si[rows])).to_pylist())
                keep = np.ones(len(ci), dtype=bool)
                keep[rows] = found
                ci, si = ci[keep], si[keep]
        return ci, si

    @cached_property
    def top_matches(self) -> tuple[np.ndarray, np.ndarray]:
        ci, si = self.matches
        keep = self.top[ci]
        return ci[keep], si[keep]

    @cached_property
    def top_matched(self) -> np.ndarray:
        """Per retrieved chunk: it is in the top K and matches some gold support."""
        return np.bincount(self.top_matches[0], minlength=len(self.chunk_case)) > 0

    @cached_property
    def support_hit(self) -> np.ndarray:
        """Per gold support: some top-K chunk matches it."""
        return np.bincount(self.top_matches[1], minlength=len(self.golden.supports)) > 0

    @cached_property
    def support_referenced(self) -> np.ndarray:
        """Per gold support: one of the answer's references matches it (no snippet rule: references have no text)."""
        refs, supports = self.captures.references, self.golden.supports
        codes = self.batch.path_codes
        _, si = anchor_pairs(
            refs.parent,
            codes["references"],
            refs.column("heading"),
            supports.parent,
            codes["supports"],
            supports.column("heading"),
        )
        return np.bincount(si, minlength=len(supports)) > 0

    @cached_property
    def chunk_label(self) -> np.ndarray:
        """Per retrieved chunk: the most specific human chunk label it lies under (the first of equals), or -1."""
        chunks, labels = self.captures.chunks, self.golden.chunk_labels
        codes = self.batch.path_codes
        ci, li = anchor_pairs(
            chunks.parent,
            codes["chunks"],
            chunks.column("heading"),
            labels.parent,
            codes["chunk_labels"],
            labels.column("heading"),
        )
        depth = to_numpy(labels.column("depth"), 0, np.int64)
        order = np.lexsort((li, -depth[li], ci))
        ci, li = ci[order], li[order]
        first = np.ones(len(ci), dtype=bool)
        first[1:] = ci[1:] != ci[:-1]
        out = np.full(len(chunks), -1, dtype=np.int64)
        out[ci[first]] = li[first]
        return out

    def chunk_label_values(self, name: str) -> np.ndarray:
        """Per retrieved chunk: its human label `name` (0/1), or -1 where it has none."""
        values = to_numpy(self.golden.chunk_labels.column(name), -1, np.int64)
        label = self.chunk_label
        return np.where(label >= 0, values[np.maximum(label, 0)] if len(values) else -1, -1)

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """A value several metrics read (raglake.metrics.columnar_answers), made once per batch."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]


def grouped(parent: np.ndarray, values: pa.Array, rows: np.ndarray, n: int) -> list[list[Any]]:
    """The values of each of `rows`' groups (parent sorted), as Python lists."""
    starts = group_starts(parent, n)
    sizes = (starts[rows + 1] - starts[rows]).astype(np.int64)
    take = np.repeat(starts[rows], sizes) + np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    flat = values.take(pa.array(take, type=pa.int64())).to_pylist()
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def ideal_sums(parent: np.ndarray, grades: np.ndarray, n: int, k: int, disc: np.ndarray) -> np.ndarray:
    """ideal_dcg per group: the K best positive grades at positions 1..K."""
    keep = grades > 0
    parent, grades = parent[keep], grades[keep]
    order = np.lexsort((-grades, parent))
    parent, grades = parent[order], grades[order]
    position = np.arange(len(parent)) - group_starts(parent, n)[parent] + 1
    within = position <= k
    return ordered_sums(parent[within], gains(grades[within]) / disc[position[within]], n)
