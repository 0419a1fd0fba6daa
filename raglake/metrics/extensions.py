"""What a run adds to the registry from its eval file: the user's Python metrics (plugins), judge rubrics
and assertions. Part of RunSettings, so it travels with the run (a deployment's flow, a Dask worker) and
each process that scores it registers the same metrics."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from raglake.errors import ConfigError
from raglake.metrics.assertions import AssertionSpec, register_assertions
from raglake.metrics.plugins import load_entry_points, load_plugins
from raglake.metrics.registry import Metric, claim, select_metrics
from raglake.metrics.rubrics import PASS_SUFFIX, RubricSpec, register_rubrics


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
        """Register every metric they define (again: the same definitions replace themselves, and another eval
        file's metric of the same name is replaced) and the installed packages' metrics; the names this eval
        file defines. One name defined twice in this eval file is a ConfigError."""
        load_entry_points()
        taken = self._clash(set(self.rubrics_names()), set(self.assertions))
        plugins = load_plugins(self.plugins, self.base_dir, self.source)
        self._clash(set(plugins), taken)
        rubrics, assertions = (
            register_rubrics(self.rubrics, self.source),
            register_assertions(self.assertions, self.source),
        )
        names = [*plugins, *rubrics, *assertions]
        if self.source is not None:
            claim(names, self.source)
        return names

    def rubrics_names(self) -> list[str]:
        """The metrics the rubrics define: NAME, and NAME_pass for a rubric with a threshold."""
        names = []
        for name, spec in self.rubrics.items():
            names += [name, name + PASS_SUFFIX] if spec.threshold is not None else [name]
        return names

    def select(self, names: list[str] | None, level: str = "case") -> list[Metric]:
        """The metrics a job computes: those named (built-in, installed or this eval file's own), else the
        built-in and installed ones and this eval file's own."""
        return select_metrics(names, level, extra=self.activate())

    def _clash(self, names: set[str], others: set[str]) -> set[str]:
        both = sorted(names & others)
        if both:
            raise ConfigError(
                f"{self.source or 'the eval file'}: metric {both[0]!r} is defined twice (a plugin, a rubric or an "
                f"assertion of one eval file); rename one"
            )
        return names | others
