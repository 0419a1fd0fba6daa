"""A user's own metrics in Python: `@raglake.metric(...)` on a pure function of the case, in a module named
by the eval file (`plugins:`) or in an installed package (entry-point group `raglake.metrics`).

(Stub: the plugins engineer of issue 26 replaces it; the functions below are the contract.)"""

from __future__ import annotations

from collections.abc import Sequence

ENTRY_POINT_GROUP = "raglake.metrics"


def load_plugins(paths: Sequence[str], base_dir: str, source: str | None = None) -> list[str]:
    """Import each plugin module (a file relative to `base_dir`, or a module name); the names of the metrics
    they registered."""
    if paths:
        raise NotImplementedError("plugins are not implemented yet")
    return []


def load_entry_points() -> list[str]:
    """Load the installed packages' metrics (group `raglake.metrics`) once per process; their names."""
    return []
