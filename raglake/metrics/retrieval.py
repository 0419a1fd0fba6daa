"""Anchor-based retrieval metrics (METRICS.md §2; seeds 000, 001). Pure formulas first, then the
registered metrics that feed them from a case."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.anchors import path_under_folder
from raglake.columnar import normalise as norm
from raglake.columnar.arrays import to_numpy
from raglake.metrics.columnar import SKIPPED, BatchContext, Column, grouped
from raglake.metrics.columnar_answers import human_answer
from raglake.metrics.columnar_ndcg import ndcg_parts
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, columnar_form, register
from raglake.metrics.steps import ACKNOWLEDGES_CONFLICT
from raglake.schemas import GoldSupport

# ---- pure formulas ---------------------------------------------------------------------------


def reciprocal_rank(relevant_ranks: Sequence[int]) -> float:
    """1 / the smallest rank that is relevant, 0 when none is."""
    return 1.0 / min(relevant_ranks) if relevant_ranks else 0.0


def dcg(grades_by_rank: Sequence[tuple[int, float]]) -> float:
    """DCG = Σ (2^grade − 1) / log2(rank + 1) over (rank, grade) pairs (exponential gains)."""
    return sum((2.0**g - 1.0) / math.log2(r + 1) for r, g in grades_by_rank if g > 0)


def ideal_dcg(grades: Sequence[float], k: int) -> float:
    """DCG of the K best grades placed at ranks 1..K."""
    best = sorted((g for g in grades if g > 0), reverse=True)[:k]
    return dcg(list(enumerate(best, start=1)))


def label_grade(topically_relevant: int | None, evidence_sufficient: int | None) -> int:
    """Seed 000: 2 if evidence_sufficient, 1 if topically_relevant only, else 0."""
    return 2 if evidence_sufficient == 1 else (1 if topically_relevant == 1 else 0)


def support_grade(required: bool, has_snippets: bool) -> int:
    """METRICS.md §2: 2 if the support is required or has snippets, else 1."""
    return 2 if (required or has_snippets) else 1


# ---- registered metrics ----------------------------------------------------------------------

_NO_SUPPORTS = "no_gold_supports"


@register(
    "recall_any_at_k",
    family="retrieval",
    version="2",
    scale="binary",
    higher_is_better=True,
    seed="001",
    applies_to="answerable",
    inputs=("retrieved", "gold_supports"),
    headline=True,
    worst_cases=True,
)
def recall_any_at_k(ctx: CaseContext) -> Score:
    """1 if any top-K chunk matches any gold support, else 0."""
    if not ctx.case.gold_supports:
        return Score.undefined(_NO_SUPPORTS)
    return Score.ok(float(any(ctx.matches)))


@register(
    "recall_all_at_k",
    family="retrieval",
    version="2",
    scale="binary",
    higher_is_better=True,
    seed="001",
    inputs=("retrieved", "gold_supports", "required_support_groups"),
)
def recall_all_at_k(ctx: CaseContext) -> Score:
    """1 if every required support group has a top-K match, else 0."""
    groups = ctx.case.required_support_groups
    if not groups:
        return Score.undefined("no_required_groups")
    hit = set().union(*ctx.matches) if ctx.matches else set()
    return Score.ok(float(all(any(i in hit for i in group) for group in groups)))


@register(
    "mrr_at_k",
    family="retrieval",
    version="2",
    scale="0-1",
    higher_is_better=True,
    seed="001,000",
    applies_to="answerable",
    inputs=("retrieved", "gold_supports"),
    headline=True,
)
def mrr_at_k(ctx: CaseContext) -> Score:
    """1 / rank of the first top-K chunk matching a gold support, 0 if none."""
    if not ctx.case.gold_supports:
        return Score.undefined(_NO_SUPPORTS)
    return Score.ok(reciprocal_rank([c.rank for c, m in zip(ctx.top, ctx.matches) if m]))


@register(
    "precision_at_k",
    family="retrieval",
    version="2",
    scale="0-1",
    higher_is_better=True,
    seed="001",
    applies_to="answerable",
    inputs=("retrieved", "gold_supports"),
)
def precision_at_k(ctx: CaseContext) -> Score:
    """(# top-K chunks matching any gold support) / K; missing ranks count as not relevant."""
    if not ctx.case.gold_supports:
        return Score.undefined(_NO_SUPPORTS)
    return Score.ok(sum(1 for m in ctx.matches if m) / ctx.k)


def _credit_order(supports: Sequence[GoldSupport], grades: dict[int, float]) -> dict[int, int]:
    """Which support a chunk credits first when it matches several uncredited ones: the best grade,
    then the most specific anchor (a later chunk under the deeper one also matches the shallower
    ones), then the anchor and snippets themselves. A function of content only, never of the position
    in gold_supports; supports tied on this key match the same chunks with the same grade."""

    def key(i: int) -> tuple:
        s = supports[i]
        return -grades[i], -len(s.heading_path), s.heading_path, sorted(s.snippets)

    return {i: pos for pos, i in enumerate(sorted(range(len(supports)), key=key))}


def _ndcg_grades(ctx: CaseContext) -> tuple[list[tuple[int, float]], list[float]]:
    """(rank, grade) of the top-K chunks and the grades of the known relevant set.

    Each relevance unit (a gold support, or a labelled passage matching no support) is credited once,
    at its first chunk; a chunk matching several uncredited supports credits the best of them
    (`_credit_order`). The chunk's grade is the credited support's, or its label grade when labelled
    (the higher of the two when both); the ideal set holds each unit at the best grade seen for it.
    """
    supports = ctx.case.gold_supports
    own: dict[object, float] = {i: support_grade(s.required, bool(s.snippets)) for i, s in enumerate(supports)}
    ideal, order = dict(own), _credit_order(supports, own)
    credited: set[object] = set()
    ranked: list[tuple[int, float]] = []
    for chunk, matched, label in zip(ctx.top, ctx.matches, ctx.chunk_labels):
        labelled = label is not None and (label.topically_relevant is not None or label.evidence_sufficient is not None)
        unit: object | None = min((i for i in matched if i not in credited), key=order.__getitem__, default=None)
        if unit is None and labelled and not matched:
            unit = ("label", label.rel_path, label.heading_path)
            if unit in credited:
                unit = None
        if unit is None:
            ranked.append((chunk.rank, 0.0))
            continue
        grade = own.get(unit, 0.0)
        if labelled:
            grade = max(grade, float(label_grade(label.topically_relevant, label.evidence_sufficient)))
        ideal[unit] = max(ideal.get(unit, 0.0), grade)
        credited.add(unit)
        ranked.append((chunk.rank, grade))
    return ranked, list(ideal.values())


@register(
    "ndcg_at_k",
    family="retrieval",
    version="2",
    scale="0-1",
    higher_is_better=True,
    seed="000,001",
    inputs=("retrieved", "gold_supports", "labels"),
    headline=True,
    worst_cases=True,
)
def ndcg_at_k(ctx: CaseContext) -> Score:
    """DCG@K / IDCG@K, gains 2^g − 1; each gold support credited once, at its first match, best grade first."""
    if not ctx.case.gold_supports and not any(ctx.chunk_labels):
        return Score.undefined("no_gold_supports_or_labels")
    ranked, ideal_grades = _ndcg_grades(ctx)
    idcg = ideal_dcg(ideal_grades, ctx.k)
    if idcg == 0:
        return Score.undefined("idcg_zero")
    return Score.ok(dcg(ranked) / idcg)


@register(
    "scope_miss",
    family="retrieval",
    scale="binary",
    higher_is_better=False,
    seed="001",
    inputs=("folder_mode", "selected_folders", "gold_supports"),
)
def scope_miss(ctx: CaseContext) -> Score:
    """With folder selection on: 1 if no gold support's rel_path lies under a selected folder."""
    if ctx.capture.folder_mode not in ("on", "on_with_fallback"):
        return Score.undefined("folder_mode_off")
    if not ctx.case.gold_supports:
        return Score.undefined(_NO_SUPPORTS)
    folders = ctx.capture.selected_folders
    inside = any(path_under_folder(s.rel_path, f) for s in ctx.case.gold_supports for f in folders)
    return Score.ok(0.0 if inside else 1.0)


@register(
    "attribution_hit",
    family="retrieval",
    scale="binary",
    higher_is_better=True,
    seed="001",
    applies_to="answerable",
    inputs=("references", "gold_supports"),
)
def attribution_hit(ctx: CaseContext) -> Score:
    """1 if any of the answer's references matches a gold support (same anchor rule), else 0."""
    if not ctx.case.gold_supports:
        return Score.undefined(_NO_SUPPORTS)
    return Score.ok(float(any(ctx.reference_matches(i) for i in range(len(ctx.case.gold_supports)))))


@register(
    "recency_rule_ok",
    family="retrieval",
    scale="binary",
    higher_is_better=True,
    seed="001",
    version="2",  # 2: a judge reply that is no real answer (raglake.judge.honesty) gives no acknowledges_conflict
    inputs=("references", "gold_supports", "recency_conflict_rule", "labels"),
    steps=(ACKNOWLEDGES_CONFLICT,),
)
def recency_rule_ok(ctx: CaseContext) -> Score:
    """cite_newer: cites the newest support; cite_both: cites every support; acknowledge_both: cite_both and acknowledges the conflict."""  # noqa: E501
    rule = ctx.case.recency_conflict_rule
    if rule is None:
        return Score.undefined("no_recency_rule")
    supports = ctx.case.gold_supports
    if not supports:
        return Score.undefined(_NO_SUPPORTS)
    if rule == "cite_newer":
        newest = max(s.date for s in supports if s.date)
        targets = [i for i, s in enumerate(supports) if s.date == newest]
        return Score.ok(float(any(ctx.reference_matches(i) for i in targets)))
    cites_all = all(ctx.reference_matches(i) for i in range(len(supports)))
    if rule == "cite_both" or not cites_all:
        return Score.ok(float(cites_all))
    label = ctx.answer_label("acknowledges_conflict")
    if label is None:
        judged = (ctx.judge or {}).get(ACKNOWLEDGES_CONFLICT.name)
        if judged is not None and judged.status != "ok":  # the judge was asked and did not deliver
            return Score.failed(judged.status, judged.reason, **judged.judge_meta())
        return Score.skipped("no_judge")
    return Score.ok(float(label.value), source=label.source)


# ---- vectorised forms (raglake.metrics.columnar): the same scores over a whole batch -----------------------


def _with_supports(bc: BatchContext) -> tuple[Column, np.ndarray]:
    """A column with `no_gold_supports` where the case has none, and the rows that have some."""
    col = Column(bc.n)
    has = bc.n_supports > 0
    col.undefined(~has, _NO_SUPPORTS)
    return col, has


def _top_hit_cases(bc: BatchContext) -> np.ndarray:
    """Per case: the top-K chunks that match some gold support, counted once each."""
    return np.bincount(bc.chunk_case[bc.top_matched], minlength=bc.n)


@columnar_form("recall_any_at_k")
def _recall_any_columns(bc: BatchContext) -> Column:
    col, has = _with_supports(bc)
    col.ok(has, (_top_hit_cases(bc) > 0).astype(np.float64))
    return col


@columnar_form("recall_all_at_k")
def _recall_all_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    groups, n_groups = bc.golden.groups, bc.golden.n_groups
    has = n_groups > 0
    col.undefined(~has, "no_required_groups")
    group_start = np.cumsum(n_groups) - n_groups
    member = to_numpy(groups.column("support"), 0, np.int64) + bc.support_start[groups.parent]
    group_id = group_start[groups.parent] + to_numpy(groups.column("group"), 0, np.int64)
    satisfied = np.bincount(group_id[bc.support_hit[member]], minlength=int(n_groups.sum())) > 0
    unmet = np.bincount(np.repeat(np.arange(bc.n), n_groups)[~satisfied], minlength=bc.n)
    col.ok(has, (unmet == 0).astype(np.float64))
    return col


@columnar_form("mrr_at_k")
def _mrr_columns(bc: BatchContext) -> Column:
    col, has = _with_supports(bc)
    ci = np.flatnonzero(bc.top_matched)
    first = np.full(bc.n, np.inf)
    np.minimum.at(first, bc.chunk_case[ci], bc.chunk_rank[ci].astype(np.float64))
    col.ok(has, np.where(np.isfinite(first), 1.0 / first, 0.0))
    return col


@columnar_form("precision_at_k")
def _precision_columns(bc: BatchContext) -> Column:
    col, has = _with_supports(bc)
    col.ok(has, _top_hit_cases(bc) / bc.k)
    return col


@columnar_form("ndcg_at_k")
def _ndcg_columns(bc: BatchContext) -> Column:
    """Cases where a top-K chunk matches two or more supports (the crediting order decides) are left to ndcg_at_k."""
    col = Column(bc.n)
    labelled_top = np.bincount(bc.chunk_case[bc.top & (bc.chunk_label >= 0)], minlength=bc.n) > 0
    col.undefined((bc.n_supports == 0) & ~labelled_top, "no_gold_supports_or_labels")
    dcg_, idcg = ndcg_parts(bc)
    rows = col.status < 0
    col.undefined(rows & (idcg == 0), "idcg_zero")
    rows &= idcg != 0
    col.ok(rows, np.divide(dcg_, idcg, out=np.zeros(bc.n), where=idcg != 0))
    multi = np.bincount(bc.top_matches[0], minlength=len(bc.chunk_case)) >= 2
    col.defer(np.bincount(bc.chunk_case[multi], minlength=bc.n) > 0)
    return col


@columnar_form("scope_miss")
def _scope_miss_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    mode = bc.capture_column("folder_mode")
    on = norm.mask(pc.is_in(mode, pa.array(["on", "on_with_fallback"])))
    col.undefined(~on, "folder_mode_off")
    col.undefined(on & (bc.n_supports == 0), _NO_SUPPORTS)
    rows = np.flatnonzero(on & (bc.n_supports > 0))
    supports = bc.golden.supports
    paths = grouped(supports.parent, supports.column("rel_path"), rows, bc.n)
    folders = bc.capture_column("selected_folders").take(pa.array(rows, type=pa.int64())).to_pylist()
    values = np.zeros(bc.n)
    inside = [any(path_under_folder(p, f) for p in ps for f in fs) for ps, fs in zip(paths, folders)]
    values[rows] = np.where(np.asarray(inside, dtype=bool), 0.0, 1.0)
    col.ok(rows, values)
    return col


@columnar_form("attribution_hit")
def _attribution_columns(bc: BatchContext) -> Column:
    col, has = _with_supports(bc)
    cited = np.bincount(bc.golden.supports.parent[bc.support_referenced], minlength=bc.n) > 0
    col.ok(has, cited.astype(np.float64))
    return col


@columnar_form("recency_rule_ok")
def _recency_columns(bc: BatchContext) -> Column:
    """Without a judge (with one, recency_rule_ok runs per case)."""
    col = Column(bc.n)
    rule = bc.case_column("recency_conflict_rule")
    col.undefined(norm.mask(pc.is_null(rule)), "no_recency_rule")
    col.undefined(norm.mask(pc.is_valid(rule)) & (bc.n_supports == 0), _NO_SUPPORTS)
    parent, referenced = bc.golden.supports.parent, bc.support_referenced
    days = to_numpy(bc.golden.supports.column("date").cast(pa.date32()).cast(pa.int32()), -(2**31), np.int64)
    newest = np.full(bc.n, -(2**31), dtype=np.int64)
    np.maximum.at(newest, parent, days)
    target = (days == newest[parent]) & (days > -(2**31))
    cites_newer = np.bincount(parent[target & referenced], minlength=bc.n) > 0
    cites_all = np.bincount(parent[~referenced], minlength=bc.n) == 0
    open_ = col.status < 0
    col.ok(open_ & norm.mask(pc.equal(rule, "cite_newer")), cites_newer.astype(np.float64))
    both = open_ & norm.mask(pc.equal(rule, "cite_both"))
    ack = open_ & norm.mask(pc.equal(rule, "acknowledge_both"))
    col.ok(both | (ack & ~cites_all), cites_all.astype(np.float64))
    given, value = human_answer(bc)["acknowledges_conflict"]
    col.ok(ack & cites_all & given, value.astype(np.float64), source="human")
    col.failed(ack & cites_all & ~given, SKIPPED, "no_judge")
    return col
