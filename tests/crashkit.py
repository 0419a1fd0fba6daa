"""Run the raglake command line with one stage rigged to kill its own process (SIGKILL, as `kill -9`)
at a chosen call: a test harness, so production code carries no fault-injection hook.

    python tests/crashkit.py STAGE N run --target … --run-id …

kills at the N-th call of the stage's function (see STAGES), before that call does its work;
`landing` counts only the write of the `runs` row (every other file of the run is already written).
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `raglake` importable from the checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# stage -> (module, class, method, which calls count)
STAGES = {
    "capture": ("raglake.targets.replay", "ReplayFile", "capture_lines", lambda *a, **kw: True),  # per batch
    "embedding": ("raglake.embed.cache", "EmbeddingCache", "put", lambda *a, **kw: True),
    "judge": ("raglake.judge.ledger", "JudgeLedger", "record", lambda *a, **kw: True),
    "scoring": ("raglake.pipeline.scoring", None, "score_columnar", lambda *a, **kw: True),  # per batch
    "landing": ("raglake.lake.store", "Lake", "write", lambda self, table, *a, **kw: table == "runs"),
}


def arm(stage: str, nth: int) -> None:
    """Replace the stage's function by one that kills this process at its `nth` counted call."""
    module_name, owner_name, attr, counts = STAGES[stage]
    module = importlib.import_module(module_name)
    owner = getattr(module, owner_name) if owner_name else module
    original = getattr(owner, attr)
    lock, seen = threading.Lock(), [0]

    def rigged(*args, **kwargs):
        if counts(*args, **kwargs):
            with lock:
                seen[0] += 1
                if seen[0] >= nth:
                    os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, attr, rigged)


def main() -> None:
    stage, nth, *argv = sys.argv[1:]
    arm(stage, int(nth))
    from raglake.cli import main as raglake_main

    sys.argv = ["raglake", *argv]
    raglake_main()


if __name__ == "__main__":
    main()
