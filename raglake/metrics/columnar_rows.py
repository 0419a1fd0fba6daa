"""The rows a batch scored in columns produces, as Arrow arrays named like the lake's columns: scores
(case × metric, in the per-case path's order), labels (every source, no judge) and retrieved chunks
with the gold supports they match. raglake.pipeline.scoring makes tables of them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from raglake.columnar.arrays import list_array
from raglake.metrics.columnar import SCORE_META, BatchContext, Column
from raglake.metrics.columnar_answers import ANSWER_SOURCES, human_answer, rule_labels
from raglake.metrics.registry import STATUSES, Metric
from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS

_META_COLUMNS = dict(zip(SCORE_META, ("embedder", "judge_model", "prompt_id", "prompt_version", "judge_call")))


def strings(vocab: Sequence[str], codes: np.ndarray) -> pa.Array:
    """vocab[code] per row (-1: null) as a string array."""
    codes = np.asarray(codes, dtype=np.int64)
    if not len(vocab) or not (codes >= 0).any():
        return pa.nulls(len(codes), pa.string())
    return pa.array(list(vocab), pa.string()).take(pa.array(codes, mask=codes < 0))


def tiled(names: Sequence[str], n: int) -> pa.Array:
    """The names in turn, n times over (row i: names[i % len(names)])."""
    encoded = [x.encode("utf-8") for x in names]
    lengths = np.tile(np.array([len(e) for e in encoded], dtype=np.int64), n)
    if int(lengths.sum()) >= 2**31:
        return strings(names, np.tile(np.arange(len(names)), n))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded) * n))


def repeated(values: pa.Array, counts: np.ndarray) -> pa.Array:
    """Each value `counts` times in a row."""
    return values.take(pa.array(np.repeat(np.arange(len(values), dtype=np.int64), counts)))


def _coded(columns: Sequence[Column], codes: list[np.ndarray]) -> pa.Array:
    """Interleaved strings (row = case × metric) from each column's codes into its own vocabulary."""
    if not any(col.vocab for col in columns):  # no column names any string: all null (judge and embedder fields)
        return pa.nulls(sum(len(c) for c in codes), pa.string())
    vocab, shifted = [], []
    for col, c in zip(columns, codes):
        shifted.append(np.where(c >= 0, c + len(vocab), -1))
        vocab.extend(col.vocab)
    flat = np.stack(shifted, axis=1).ravel() if shifted else np.zeros(0, np.int64)
    return strings(vocab, flat)


def score_arrays(case_ids: pa.Array, metrics: Sequence[Metric], columns: Sequence[Column]) -> dict[str, pa.Array]:
    """One row per case × metric, by case, then in the order of `metrics`."""
    n, m = len(case_ids), len(metrics)
    status = np.stack([c.status for c in columns], axis=1).ravel() if m else np.zeros(0, np.int8)
    if (status < 0).any():
        raise AssertionError("a columnar metric left rows without a score")
    out = {
        "case_id": repeated(case_ids, np.full(n, m)),
        "metric": tiled([x.name for x in metrics], n),
        "value": pa.array(np.stack([c.value for c in columns], axis=1).ravel() if m else np.zeros(0)),
        "status": strings(STATUSES, status),
        "reason": _coded(columns, [c.reason for c in columns]),
        "metric_version": tiled([x.version for x in metrics], n),
        "label_source": _coded(columns, [c.source for c in columns]),
    }
    for field, column in _META_COLUMNS.items():
        if not any(field in c.meta for c in columns):
            out[column] = pa.nulls(n * m, pa.string())
            continue
        out[column] = _coded(columns, [c.meta.get(field, np.full(n, -1, np.int32)) for c in columns])
    return out


def chunk_arrays(bc: BatchContext) -> dict[str, pa.Array]:
    """Every retrieved chunk (beyond K too), by case and rank, with the gold supports it matches."""
    chunks = bc.captures.chunks
    ci, si = bc.matches
    local = (si - bc.support_start[bc.golden.supports.parent[si]]).astype(np.int32)
    return {
        "case_id": repeated(bc.batch.case_ids, np.bincount(chunks.parent, minlength=bc.n)),
        "rank": chunks.column("rank").cast(pa.int32()),
        "rel_path": chunks.column("rel_path"),
        "heading_path": chunks.column("heading"),
        "text": chunks.table.column("text"),
        "score": chunks.column("score"),
        "chunk_id": chunks.column("chunk_id"),
        "in_top_k": pa.array(bc.top),
        "matched_supports": list_array(ci, pa.array(local, pa.int32()), len(chunks)),
    }


def label_arrays(bc: BatchContext) -> dict[str, pa.Array]:
    """The labels of every case without a judge: human chunk labels of the top-K chunks, then (captures
    that did not fail) human answer labels, then the rules' — the per-case path's rows, in its order."""
    parts: list[tuple[np.ndarray, ...]] = []  # case, block, position, name, value, source, rank
    top = np.flatnonzero(bc.top)
    for j, name in enumerate(CHUNK_LABELS):
        values = bc.chunk_label_values(name)[top]
        at = top[values >= 0]
        parts.append((bc.chunk_case[at], np.zeros(len(at)), at, np.full(len(at), j), values[values >= 0], 0 * at, at))
    fine = ~bc.failed
    rule = rule_labels(bc)
    for j, name in enumerate(ANSWER_LABELS):
        given, value = human_answer(bc)[name]
        rows = np.flatnonzero(given & fine)
        parts.append((rows, np.ones(len(rows)), 0 * rows, np.full(len(rows), j), value[rows], 0 * rows, -1 - 0 * rows))
        if name in rule:
            rows = np.flatnonzero(fine)
            parts.append(
                (
                    rows,
                    np.full(len(rows), 2),
                    0 * rows,
                    np.full(len(rows), j),
                    rule[name][rows],
                    1 + 0 * rows,
                    -1 - 0 * rows,
                )
            )
    case, block, position, name_index, value, source, chunk = (np.concatenate(p).astype(np.int64) for p in zip(*parts))
    order = np.lexsort((name_index, position, block, case))
    case, name_index, value, source, chunk = case[order], name_index[order], value[order], source[order], chunk[order]
    ranks = np.zeros(len(chunk), dtype=np.int64)
    ranks[chunk >= 0] = bc.chunk_rank[chunk[chunk >= 0]]
    names = list(CHUNK_LABELS) + list(ANSWER_LABELS)
    return {
        "case_id": repeated(bc.batch.case_ids, np.bincount(case, minlength=bc.n)),
        "level": strings(["chunk", "answer"], np.where(chunk >= 0, 0, 1)),
        "rank": pa.array(ranks.astype(np.int32), mask=chunk < 0),
        "label": strings(names, np.where(chunk >= 0, name_index, name_index + len(CHUNK_LABELS))),
        "value": pa.array(value.astype(np.int8)),
        "label_source": strings(ANSWER_SOURCES, source),
    }
