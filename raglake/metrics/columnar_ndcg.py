"""ndcg_at_k over a batch (raglake.metrics.columnar): the crediting of raglake.metrics.retrieval._ndcg_grades
in arrays, for cases where no top-K chunk matches two or more supports (there the crediting order decides,
and ndcg_at_k itself scores the case)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from raglake.columnar import normalise as norm
from raglake.metrics.columnar import BatchContext, discounts, gains, ideal_sums, ordered_sums


def ndcg_parts(bc: BatchContext) -> tuple[np.ndarray, np.ndarray]:
    """(DCG@K, IDCG@K) per case as ndcg_at_k credits them, for cases where no top-K chunk matches two or
    more supports: a support is credited at its first matching chunk (its grade, or the chunk's label
    grade when higher); a labelled chunk matching none credits its label's anchor once."""
    ci, si = bc.top_matches
    n_chunks = len(bc.chunk_case)
    chunk = np.arange(n_chunks)
    support_of = np.full(n_chunks, -1, dtype=np.int64)
    support_of[ci] = si
    first = np.full(len(bc.golden.supports), n_chunks, dtype=np.int64)
    np.minimum.at(first, si, ci)
    matched = support_of >= 0
    credits = np.zeros(n_chunks, dtype=bool)
    credits[matched] = first[support_of[matched]] == chunk[matched]
    credits &= bc.top
    supports = bc.golden.supports
    has_snippets = np.asarray(pc.list_value_length(supports.column("snippets"))) > 0
    own = np.where(norm.mask(supports.column("required")) | has_snippets, 2.0, 1.0)
    t = bc.chunk_label_values("topically_relevant")
    s = bc.chunk_label_values("evidence_sufficient")
    labelled = (bc.chunk_label >= 0) & ((t >= 0) | (s >= 0))
    label_grade = np.where(s == 1, 2.0, np.where(t == 1, 1.0, 0.0))
    grade = np.zeros(n_chunks)
    grade[credits] = own[support_of[credits]]
    grade = np.where(credits & labelled, np.maximum(grade, label_grade), grade)
    by_label = _first_of_label(bc, bc.top & (support_of < 0) & (np.bincount(ci, minlength=n_chunks) == 0) & labelled)
    grade[by_label] = label_grade[by_label]
    ranks = bc.chunk_rank
    disc = discounts(bc.k, int(ranks[bc.top].max(initial=0)))
    top = np.flatnonzero(bc.top)
    dcg = ordered_sums(bc.chunk_case[top], gains(grade[top]) / disc[ranks[top]], bc.n)
    credited = first < n_chunks
    ideal = own.copy()
    ideal[credited] = grade[first[credited]]
    units = np.concatenate([ideal, grade[by_label]])
    parent = np.concatenate([supports.parent, bc.chunk_case[by_label]])
    return dcg, ideal_sums(parent, units, bc.n, bc.k, disc)


def _first_of_label(bc: BatchContext, candidates: np.ndarray) -> np.ndarray:
    """Of the candidate chunks, the first of its case to lie under each distinct label anchor."""
    rows = np.flatnonzero(candidates)
    labels = bc.golden.chunk_labels
    label = bc.chunk_label[rows]
    path = bc.batch.path_codes["chunk_labels"][label]
    heading = np.asarray(pc.dictionary_encode(labels.column("heading")).indices, dtype=np.int64)[label]
    case = bc.chunk_case[rows]
    order = np.lexsort((rows, heading, path, case))
    keys = np.stack([case[order], path[order], heading[order]])
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (keys[:, 1:] != keys[:, :-1]).any(axis=0)
    out = np.zeros(len(bc.chunk_case), dtype=bool)
    out[rows[order][new]] = True
    return out
