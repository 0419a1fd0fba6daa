"""A user's own judge rubrics (GEval-style criteria) as judge metrics.

(Stub: the rubrics engineer of issue 26 replaces it; the names below are the contract.)"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict


class RubricSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    criteria: str


def register_rubrics(specs: Mapping[str, RubricSpec], source: str | None = None) -> list[str]:
    if specs:
        raise NotImplementedError("rubrics are not implemented yet")
    return []
