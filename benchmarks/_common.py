"""Helpers shared by the benchmark scripts.

The scripts run as `python benchmarks/X.py`, so this folder is sys.path[0] and the modules beside them
import by their plain names (`from _common import ROOT`); each script puts ROOT on sys.path before it
imports raglake or a module of its own that does.
"""

from __future__ import annotations

import resource
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    """The q-th percentile of the values (nan for none)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def max_rss_mib() -> float:
    """Peak resident memory of this process so far (getrusage ru_maxrss), in MiB."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


@contextmanager
def work_folder(keep: Path | None, prefix: str) -> Iterator[Path]:
    """The benchmark's working folder: `keep` (created, left in place), else a new temp folder that is
    removed when the benchmark ends, however it ends (a 1M-case run leaves gigabytes of JSONL and lakes)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield keep
        return
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
