"""Metrics: pure functions of a case (or a run) and the registry that lists them. Importing the package
imports every built-in metric module, which registers its metrics, so the registry is complete as soon as
any of it can be read."""

from raglake.metrics import (  # noqa: F401
    abstention,
    assertions,
    columnar_vectors,
    coverage,
    embedding,
    judge,
    judge_run,
    labels,
    operational,
    retrieval,
    variants,
)
