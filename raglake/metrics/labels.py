"""Label metrics (METRICS.md §3, seed 000): per-chunk labels t, s, m over the top-K and per-answer
labels g, v, x, z, f, d, o, h, n, r. Each case value is a mean's summand, so the dataset value is
the mean over `ok` rows (conditional_fabrication_rate is Σz·f / Σz: defined only where z = 1)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raglake.metrics.columnar import BatchContext, Column, discounts, gains, ideal_sums, ordered_sums
from raglake.metrics.columnar_answers import ANSWER_SOURCES, answer_label
from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, columnar_form, register
from raglake.metrics.retrieval import dcg, ideal_dcg, label_grade, reciprocal_rank
from raglake.metrics.steps import JUDGE_LABELS, LABEL_ANSWER, LABEL_CHUNKS


def _chunk_values(ctx: CaseContext, name: str) -> tuple[list[int], str] | Score:
    """The label `name` of every top-K chunk (human where given, else the judge's) and its source,
    or an `undefined` score saying which ranks lack it."""
    labels = ctx.effective_chunk_labels
    if not ctx.annotated and not any(labels):
        return Score.undefined("no_labels")
    missing = [c.rank for c, lab in zip(ctx.top, labels) if lab is None or name not in lab[0]]
    if missing:
        return Score.undefined(f"unlabelled_ranks:{','.join(map(str, missing))}")
    sources = sorted({s for lab in labels for s in lab[1].split("+")})
    return [lab[0][name] for lab in labels], "+".join(sources) or "human"


def _mean_over_k(ctx: CaseContext, name: str) -> Score:
    found = _chunk_values(ctx, name)
    if isinstance(found, Score):
        return found
    values, source = found
    return Score.ok(sum(values) / ctx.k, source=source)


_CHUNK = dict(family="label", seed="000", inputs=("retrieved", "labels"), steps=(LABEL_CHUNKS,))


@register("topical_precision_at_k", scale="0-1", higher_is_better=True, **_CHUNK)
def topical_precision_at_k(ctx: CaseContext) -> Score:
    """(1/K) Σ topically_relevant over the top-K."""
    return _mean_over_k(ctx, "topically_relevant")


@register("sufficiency_rate_at_k", scale="0-1", higher_is_better=True, **_CHUNK)
def sufficiency_rate_at_k(ctx: CaseContext) -> Score:
    """(1/K) Σ evidence_sufficient over the top-K."""
    return _mean_over_k(ctx, "evidence_sufficient")


@register("misleading_rate_at_k", scale="0-1", higher_is_better=False, **_CHUNK)
def misleading_rate_at_k(ctx: CaseContext) -> Score:
    """(1/K) Σ misleading over the top-K."""
    return _mean_over_k(ctx, "misleading")


@register("sufficiency_hit_at_k", scale="binary", higher_is_better=True, **_CHUNK)
def sufficiency_hit_at_k(ctx: CaseContext) -> Score:
    """[Σ evidence_sufficient ≥ 1] over the top-K."""
    found = _chunk_values(ctx, "evidence_sufficient")
    return found if isinstance(found, Score) else Score.ok(float(sum(found[0]) >= 1), source=found[1])


@register("label_mrr_at_k", scale="0-1", higher_is_better=True, **_CHUNK)
def label_mrr_at_k(ctx: CaseContext) -> Score:
    """1 / the first rank with topically_relevant = 1, else 0."""
    found = _chunk_values(ctx, "topically_relevant")
    if isinstance(found, Score):
        return found
    return Score.ok(reciprocal_rank([c.rank for c, t in zip(ctx.top, found[0]) if t == 1]), source=found[1])


@register("label_ndcg_at_k", scale="0-1", higher_is_better=True, **_CHUNK)
def label_ndcg_at_k(ctx: CaseContext) -> Score:
    """Seed-000 grades (2 sufficient, 1 topical only); IDCG over the labelled top-K itself."""
    t_found = _chunk_values(ctx, "topically_relevant")
    s_found = _chunk_values(ctx, "evidence_sufficient")
    for found in (t_found, s_found):
        if isinstance(found, Score):
            return found
    grades = [label_grade(t, s) for t, s in zip(t_found[0], s_found[0])]
    idcg = ideal_dcg(grades, ctx.k)
    if idcg == 0:
        return Score.undefined("idcg_zero")
    return Score.ok(dcg([(c.rank, g) for c, g in zip(ctx.top, grades)]) / idcg, source=t_found[1])


def _answer_rate(label: str, metric: str, higher_is_better: bool, symbol: str) -> None:
    def fn(ctx: CaseContext) -> Score:
        found = ctx.answer_label(label)
        return Score.undefined("no_label") if found is None else Score.ok(found.value, source=found.source)

    fn.__doc__ = f"Share of answers with {label} = 1 (the mean of {symbol})."
    fn.__name__ = metric
    register(
        metric,
        family="label",
        scale="0-1",
        higher_is_better=higher_is_better,
        seed="000",
        # 2: a judge label from a reply that is no real answer (raglake.judge.honesty) is a parse_error
        version="2" if label in JUDGE_LABELS else "1",
        inputs=("answer", "labels"),
        steps=(LABEL_ANSWER,),
    )(fn)


_ANSWER_RATES = (
    ("support_present", "grounding_presence_rate", True, "g"),
    ("unsupported_claim_present", "unsupported_claim_rate", False, "v"),
    ("contradicted_claim_present", "contradiction_rate", False, "x"),
    ("source_cited", "citation_presence_rate", True, "z"),
    ("proper_action", "proper_action_rate", True, "d"),
    ("response_on_topic", "on_topic_rate", True, "o"),
    ("helpful", "helpfulness_rate", True, "h"),
    ("incomplete", "incompleteness_rate", False, "n"),
    ("unsafe_content", "unsafe_content_rate", False, "r"),
)
for _label, _metric, _better, _symbol in _ANSWER_RATES:
    _answer_rate(_label, _metric, _better, _symbol)


@register(
    "conditional_fabrication_rate",
    family="label",
    scale="0-1",
    higher_is_better=False,
    seed="000",
    inputs=("answer", "references", "retrieved", "labels"),
)
def conditional_fabrication_rate(ctx: CaseContext) -> Score:
    """Σ z·f / Σ z: fabricated_source among answers that cite (undefined where nothing is cited)."""
    cited = ctx.answer_label("source_cited")
    if cited is None or cited.value == 0:
        return Score.undefined("no_citation")
    fabricated = ctx.answer_label("fabricated_source")
    if fabricated is None:
        return Score.undefined("no_label")
    return Score.ok(fabricated.value, source=fabricated.source)


# ---- vectorised forms (raglake.metrics.columnar), used when no judge is configured ---------------------------


def _chunk_columns(bc: BatchContext, col: Column, name: str) -> np.ndarray:
    """Per top-K chunk, its human label `name` (-1 where missing), with `no_labels` / `unlabelled_ranks:…`
    set on the column as _chunk_values sets them."""
    col.undefined((col.status < 0) & ~bc.golden.annotated, "no_labels")
    values, rows, reasons = bc.cached(f"chunk_label.{name}", lambda: _chunk_found(bc, name))
    still = col.status[rows] < 0
    col.reasons(rows[still], [r for r, s in zip(reasons, still.tolist()) if s])
    return values


def _chunk_found(bc: BatchContext, name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(label per top-K chunk, -1 where missing; the annotated cases lacking it on a top-K chunk; their
    `unlabelled_ranks:r1,r2` reasons)."""
    top = np.flatnonzero(bc.top)
    values = bc.chunk_label_values(name)[top]
    missing = top[values < 0]
    cases = bc.chunk_case[missing]
    shown = (bc.golden.annotated & ~bc.failed)[cases]
    missing, cases = missing[shown], cases[shown]
    rows, first = np.unique(cases, return_index=True)
    if not len(rows):
        return values, rows, []
    offsets = pa.array(np.append(first, len(cases)).astype(np.int32))
    ranks = pa.ListArray.from_arrays(offsets, pa.array(bc.chunk_rank[missing]).cast(pa.string()))
    reasons = pc.binary_join_element_wise("unlabelled_ranks:", pc.binary_join(ranks, ","), "")
    return values, rows, reasons.to_pylist()


def _label_sum(bc: BatchContext, values: np.ndarray, equal_to: int | None = None) -> np.ndarray:
    top = np.flatnonzero(bc.top)
    weights = values.clip(0) if equal_to is None else (values == equal_to)
    return np.bincount(bc.chunk_case[top], weights=weights.astype(np.float64), minlength=bc.n)


def _mean_over_k_columns(name: str):
    def fn(bc: BatchContext) -> Column:
        col = Column(bc.n)
        values = _chunk_columns(bc, col, name)
        col.ok(col.status < 0, _label_sum(bc, values) / bc.k, source="human")
        return col

    return fn


for _metric, _name in (
    ("topical_precision_at_k", "topically_relevant"),
    ("sufficiency_rate_at_k", "evidence_sufficient"),
    ("misleading_rate_at_k", "misleading"),
):
    columnar_form(_metric)(_mean_over_k_columns(_name))


@columnar_form("sufficiency_hit_at_k")
def _sufficiency_hit_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    values = _chunk_columns(bc, col, "evidence_sufficient")
    col.ok(col.status < 0, (_label_sum(bc, values) >= 1).astype(np.float64), source="human")
    return col


@columnar_form("label_mrr_at_k")
def _label_mrr_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    values = _chunk_columns(bc, col, "topically_relevant")
    top = np.flatnonzero(bc.top)
    hit = top[values == 1]
    first = np.full(bc.n, np.inf)
    np.minimum.at(first, bc.chunk_case[hit], bc.chunk_rank[hit].astype(np.float64))
    col.ok(col.status < 0, np.where(np.isfinite(first), 1.0 / first, 0.0), source="human")
    return col


@columnar_form("label_ndcg_at_k")
def _label_ndcg_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    t = _chunk_columns(bc, col, "topically_relevant")
    s = _chunk_columns(bc, col, "evidence_sufficient")
    top = np.flatnonzero(bc.top)
    grades = np.where(s == 1, 2.0, np.where(t == 1, 1.0, 0.0))
    case, ranks = bc.chunk_case[top], bc.chunk_rank[top]
    disc = discounts(bc.k, int(ranks.max(initial=0)))
    idcg = ideal_sums(case, grades, bc.n, bc.k, disc)
    dcg_ = ordered_sums(case, gains(grades) / disc[ranks], bc.n)
    open_ = col.status < 0
    col.undefined(open_ & (idcg == 0), "idcg_zero")
    col.ok(open_ & (idcg != 0), np.divide(dcg_, idcg, out=np.zeros(bc.n), where=idcg != 0), source="human")
    return col


def _answer_rate_columns(label: str):
    def fn(bc: BatchContext) -> Column:
        col = Column(bc.n)
        given, value, source = answer_label(bc, label)
        col.undefined(~given, "no_label")
        col.ok(given, value.astype(np.float64))
        col.sources(given, source, ANSWER_SOURCES)
        return col

    return fn


for _label, _metric, _, _ in _ANSWER_RATES:
    columnar_form(_metric)(_answer_rate_columns(_label))


@columnar_form("conditional_fabrication_rate")
def _conditional_fabrication_columns(bc: BatchContext) -> Column:
    col = Column(bc.n)
    _, cited, _ = answer_label(bc, "source_cited")
    _, value, source = answer_label(bc, "fabricated_source")
    col.undefined(cited == 0, "no_citation")
    col.ok(cited != 0, value.astype(np.float64))
    col.sources(cited != 0, source, ANSWER_SOURCES)
    return col
