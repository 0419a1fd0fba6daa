"""Helpers shared by the benchmark scripts.

The scripts run as `python benchmarks/X.py`, so this folder is sys.path[0] and the modules beside them
import by their plain names (`from _common import ROOT`); each script puts ROOT on sys.path before it
imports raglake or a module of its own that does.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    """The q-th percentile of the values (nan for none)."""
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def cpu_seconds() -> float:
    """CPU time of this process and of its live children (Linux' /proc: the packaged model's process,
    raglake.embed.process, encodes there), in seconds; elsewhere this process's alone."""
    total = time.process_time()
    tick = os.sysconf("SC_CLK_TCK")
    for children in Path("/proc/self/task").glob("*/children"):
        for pid in children.read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


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
