"""Deterministic per-question assertions (promptfoo-style) as 0/1 metrics.

(Stub: the assertions engineer of issue 26 replaces it; the names below are the contract.)"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict


class AssertionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: str


def register_assertions(specs: Mapping[str, AssertionSpec], source: str | None = None) -> list[str]:
    if specs:
        raise NotImplementedError("assertions are not implemented yet")
    return []
