"""Where scoring batches run: `thread` (the flow's own thread pool) or `dask[:ADDRESS]` (prefect-dask:
a LocalCluster of worker processes by default, or the scheduler at ADDRESS)."""

from __future__ import annotations

from dataclasses import dataclass

from raglake.errors import ConfigError, did_you_mean

RUNNER_KINDS = ("thread", "dask")


@dataclass(frozen=True)
class RunnerSpec:
    kind: str  # thread | dask
    address: str | None = None  # a Dask scheduler (tcp://host:8786); None: a LocalCluster
    workers: int = 2

    @classmethod
    def parse(cls, spec: str | None, workers: int = 2) -> RunnerSpec:
        """`thread`, `dask` or `dask:ADDRESS` (e.g. dask:tcp://scheduler:8786)."""
        text = (spec or "thread").strip()
        kind, _, address = text.partition(":")
        if kind not in RUNNER_KINDS:
            raise ConfigError(
                f"unknown runner {text!r}: use thread, dask or dask:ADDRESS{did_you_mean(kind, RUNNER_KINDS)}"
            )
        if kind == "thread" and address:
            raise ConfigError(f"the thread runner takes no address (got {text!r})")
        if workers < 1:
            raise ConfigError(f"a Dask LocalCluster needs at least one worker, got {workers}")
        return cls(kind, address or None, workers)

    def __str__(self) -> str:
        return self.kind + (f":{self.address}" if self.address else "")
