"""`python -m raglake.golden_process GOLDEN FD`: validate a golden set into the spool file of the process
that started this one (raglake.pipeline.inputs), open here as the inherited descriptor FD (the file has
no name: raglake.spool), and write to stdout the pickled SpooledGolden, or the pickled error. Started as a
fresh interpreter, not by multiprocessing, so that the caller's own script is never imported again here."""

from __future__ import annotations

import os
import pickle
import sys

from raglake.golden import SpooledGolden, spool_golden


def main(argv: list[str]) -> int:
    golden, into = argv
    answer = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything else printed goes to stderr: stdout carries the answer only
    outcome: SpooledGolden | Exception
    try:
        outcome = spool_golden(golden, int(into))
    except Exception as e:  # noqa: BLE001 - sent back and raised there, where the load was asked for
        outcome = e if _crosses(e) else RuntimeError(f"{type(e).__name__}: {e}")
    with answer:
        pickle.dump(outcome, answer, protocol=pickle.HIGHEST_PROTOCOL)
    return 0


def _crosses(e: Exception) -> bool:
    """Whether the error pickles and unpickles whole (an exception whose __init__ takes other arguments
    than its message does not, unless it says how)."""
    try:
        pickle.loads(pickle.dumps(e))
    except Exception:  # noqa: BLE001 - any failure means it is sent as its type and message instead
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
