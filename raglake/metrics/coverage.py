"""Indexing coverage figures (METRICS.md §6, seed 001) from the target's index manifest."""

from __future__ import annotations

from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import RunValue, register


def _stats(run: RunInputs) -> dict | None:
    return run.manifest.stats() if run.manifest is not None else None


@register(
    "no_chunks_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("index_manifest",),
)
def no_chunks_rate(run: RunInputs) -> list[RunValue]:
    """Documents that produced no chunk / documents processed (unsupported types are not processed)."""
    stats = _stats(run)
    if not stats or not stats["docs_processed"]:
        return []
    return [
        RunValue(
            "no_chunks_rate",
            stats["docs_with_zero_chunks"] / stats["docs_processed"],
            None,
            stats["docs_processed"],
            "share",
        )
    ]


@register(
    "chunks_skipped_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("index_manifest",),
)
def chunks_skipped_rate(run: RunInputs) -> list[RunValue]:
    """Chunks skipped / chunks attempted, per reason in `stage`; METRICS.md's figure is the
    `over_max_sequence` row (skipped for the context limit), always present."""
    if run.manifest is None or not run.manifest.chunks_attempted:
        return []
    attempted = run.manifest.chunks_attempted
    by_reason = {"over_max_sequence": 0, **run.manifest.skipped_by_reason}
    return [
        RunValue("chunks_skipped_rate", n / attempted, reason, attempted, "share") for reason, n in by_reason.items()
    ]


def _tokens(name: str, key: str):
    def fn(run: RunInputs) -> list[RunValue]:
        stats = _stats(run)
        if not stats or stats[key] is None:
            return []
        return [RunValue(name, float(stats[key]), None, stats["chunks_embedded"], "tokens")]

    fn.__doc__ = f"{key.rsplit('_', 1)[-1]} of the tokens per embedded chunk (the embedder's tokenizer)."
    fn.__name__ = name
    register(
        name,
        family="operational",
        scale="tokens",
        higher_is_better=None,
        seed="001",
        level="run",
        inputs=("index_manifest",),
    )(fn)


for _stat in ("min", "max", "mean", "p95"):
    _tokens(f"tokens_per_chunk_{_stat}", f"tokens_per_chunk_{_stat}")


@register(
    "coverage_by_doc_type",
    family="operational",
    scale="0-1",
    higher_is_better=True,
    seed="001",
    level="run",
    inputs=("index_manifest",),
)
def coverage_by_doc_type(run: RunInputs) -> list[RunValue]:
    """Per file type (in `stage`): the share of documents that produced at least one chunk."""
    if run.manifest is None:
        return []
    out = []
    for doc_type in sorted({d.doc_type for d in run.manifest.docs}):
        docs = [d for d in run.manifest.docs if d.doc_type == doc_type]
        out.append(
            RunValue(
                "coverage_by_doc_type", sum(d.n_chunks > 0 for d in docs) / len(docs), doc_type, len(docs), "share"
            )
        )
    return out
