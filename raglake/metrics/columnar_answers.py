"""Answer labels over a batch (raglake.metrics.columnar): the human entries that apply, the deterministic
rules (raglake.metrics.rules) and abstention, as CaseContext works them out per case (no judge)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.columnar import normalise as norm
from raglake.columnar.arrays import to_numpy
from raglake.metrics import rules
from raglake.metrics.columnar import BatchContext, grouped
from raglake.schemas import ANSWER_LABELS, answer_sha256

ANSWER_SOURCES = ["human", "rule"]  # the source codes answer_label() returns


def human_answer(bc: BatchContext) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per answer label: (given, value) per case from the human entries that apply to this method and
    answer (a later entry wins)."""
    return bc.cached("human_answer", lambda: _human_answer(bc))


def _human_answer(bc: BatchContext) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    part = bc.golden.answer_labels
    applies = _entries_apply(bc)
    out = {}
    for name in ANSWER_LABELS:
        values = to_numpy(part.column(name), -1, np.int64)
        idx = np.flatnonzero(applies & (values >= 0))
        best = np.full(bc.n, -1, dtype=np.int64)
        np.maximum.at(best, part.parent[idx], idx)
        given = best >= 0
        out[name] = given, np.where(given, values[np.maximum(best, 0)] if len(values) else 0, 0)
    return out


def _entries_apply(bc: BatchContext) -> np.ndarray:
    """AnswerLabel.applies_to for every human answer-label entry."""
    part = bc.golden.answer_labels
    if not len(part):
        return np.zeros(0, dtype=bool)
    method = part.column("method")
    own = bc.capture_column("method").take(pa.array(part.parent))
    ok = norm.mask(pc.is_null(method)) | norm.mask(pc.fill_null(pc.equal(method, own), False))
    sha = part.column("answer_sha256")
    rows = np.flatnonzero(norm.mask(pc.is_valid(sha)) & ok)
    if len(rows):
        answers = bc.answers.take(pa.array(part.parent[rows])).to_pylist()
        prefixes = sha.take(pa.array(rows)).to_pylist()
        ok[rows] = [answer_sha256(a).startswith(p) for a, p in zip(answers, prefixes)]
    return ok


def abstained(bc: BatchContext) -> tuple[np.ndarray, np.ndarray]:
    """(did the target abstain, known from the explicit field): rules.abstained."""
    return bc.cached("abstained", lambda: rules.abstained_array(bc.capture_column("abstained"), bc.answers))


def rule_labels(bc: BatchContext) -> dict[str, np.ndarray]:
    """source_cited, fabricated_source and proper_action per case from the deterministic rules."""
    return bc.cached("rule_labels", lambda: _rule_labels(bc))


def _rule_labels(bc: BatchContext) -> dict[str, np.ndarray]:
    n_refs = np.bincount(bc.captures.references.parent, minlength=bc.n)
    cited = rules.cited_array(bc.answers, n_refs)
    observed = rules.observed_action_array(abstained(bc)[0], bc.answers, norm.blank(bc.answers))
    expected = np.asarray(bc.case_column("expected_action").to_numpy(zero_copy_only=False), dtype=object)
    return {
        "source_cited": cited.astype(np.int64),
        "fabricated_source": _fabricated(bc, n_refs).astype(np.int64),
        "proper_action": (observed == expected).astype(np.int64),
    }


def _fabricated(bc: BatchContext, n_refs: np.ndarray) -> np.ndarray:
    out = np.zeros(bc.n, dtype=bool)
    rows = np.flatnonzero((n_refs > 0) | rules.maybe_cites_in_text(bc.answers))
    if not len(rows):
        return out
    refs, chunks = bc.captures.references, bc.captures.chunks
    out[rows] = rules.fabricated_rows(
        bc.answers.take(pa.array(rows)).to_pylist(),
        grouped(refs.parent, refs.column("rel_path"), rows, bc.n),
        grouped(chunks.parent, chunks.column("rel_path"), rows, bc.n),
        bc.known_docs,
    )
    return out


def answer_label(bc: BatchContext, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(given, value, source code in ANSWER_SOURCES) of the effective answer label without a judge:
    human where an entry applies, else the rule's (source_cited, fabricated_source, proper_action)."""
    given, value = human_answer(bc)[name]
    source = np.where(given, 0, -1)
    rule = rule_labels(bc)
    if name in rule:
        value = np.where(given, value, rule[name])
        source = np.where(given, 0, 1)
        given = np.ones(bc.n, dtype=bool)
    return given, value, source
