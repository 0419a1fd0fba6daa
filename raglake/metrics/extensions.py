"""What a run adds to the registry from its eval file: the user's Python metrics (plugins), judge rubrics
and assertions. Part of RunSettings, so it travels with the run (a deployment's flow, a Dask worker) and
each process that scores it registers the same metrics."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from raglake.metrics.assertions import AssertionSpec, register_assertions
from raglake.metrics.plugins import load_entry_points, load_plugins
from raglake.metrics.rubrics import RubricSpec, register_rubrics


class Extensions(BaseModel):
    """The user's metrics of one eval file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str | None = Field(None, description="the eval file they come from (for messages)")
    base_dir: str = Field(".", description="the folder plugin paths are relative to (the eval file's)")
    plugins: list[str] = Field(
        default_factory=list, description="Python files (relative to the eval file) or module names of metrics"
    )
    rubrics: dict[str, RubricSpec] = Field(default_factory=dict, description="judge rubrics by metric name")
    assertions: dict[str, AssertionSpec] = Field(default_factory=dict, description="assertions by metric name")

    def __bool__(self) -> bool:
        return bool(self.plugins or self.rubrics or self.assertions)

    def activate(self) -> list[str]:
        """Register every metric they define (again: the same definitions replace themselves) and the
        installed packages' metrics; the names this eval file defines."""
        load_entry_points()
        return [
            *load_plugins(self.plugins, self.base_dir, self.source),
            *register_rubrics(self.rubrics, self.source),
            *register_assertions(self.assertions, self.source),
        ]
