"""Label metrics (METRICS.md §3, seed 000): per-chunk labels t, s, m over the top-K and per-answer
labels g, v, x, z, f, d, o, h, n, r. Each case value is a mean's summand, so the dataset value is
the mean over `ok` rows (conditional_fabrication_rate is Σz·f / Σz: defined only where z = 1)."""

from __future__ import annotations

from raglake.metrics.context import CaseContext
from raglake.metrics.registry import Score, register
from raglake.metrics.retrieval import dcg, ideal_dcg, label_grade, reciprocal_rank
from raglake.metrics.steps import LABEL_ANSWER, LABEL_CHUNKS


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
        inputs=("answer", "labels"),
        steps=(LABEL_ANSWER,),
    )(fn)


for _label, _metric, _better, _symbol in (
    ("support_present", "grounding_presence_rate", True, "g"),
    ("unsupported_claim_present", "unsupported_claim_rate", False, "v"),
    ("contradicted_claim_present", "contradiction_rate", False, "x"),
    ("source_cited", "citation_presence_rate", True, "z"),
    ("proper_action", "proper_action_rate", True, "d"),
    ("response_on_topic", "on_topic_rate", True, "o"),
    ("helpful", "helpfulness_rate", True, "h"),
    ("incomplete", "incompleteness_rate", False, "n"),
    ("unsafe_content", "unsafe_content_rate", False, "r"),
):
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
