"""raglake: evaluate RAG systems on a schedule and keep every result in a Parquet lake.

    import raglake
    result = raglake.evaluate(df)              # a DataFrame of question/answer/contexts/reference rows
    result.summary(); result.to_pandas(wide=True)
    raglake.open_lake("data/lake").runs()      # a lake's questions as DataFrames

The names below are loaded when first used (PEP 562), not when `raglake` is imported: the command
line imports this package too, and its commands that only read the lake must not load Prefect."""

from __future__ import annotations

from raglake.lazy import lazy_names

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "raglake.api.run",
    "open_lake": "raglake.api.lake",
    "LakeFrames": "raglake.api.lake",
    "Result": "raglake.api.result",
    "metric": "raglake.metrics.plugins",  # @raglake.metric(name, ...): a user's own metric in Python
}
__all__ = ["evaluate", "open_lake", "LakeFrames", "Result", "metric", "__version__"]

__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())
