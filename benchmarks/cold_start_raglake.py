"""raglake's side of benchmarks/cold_start.py: a fresh process as a notebook user or a CI job starts one.

    python benchmarks/cold_start_raglake.py ROWS.json LAKE DEVICE [ROWS2.json]

Imports raglake, reads the rows ({id, question, answer, reference, contexts}), calls
`raglake.evaluate(rows, metrics="semantic_similarity", lake=LAKE, device=DEVICE)` and exits normally,
after one JSON line on stdout with its own marks, in seconds from this script's first line: `import`
(import raglake done) and `evaluate` (evaluate() returned), and `call` (that call alone). The parent
times the whole process and reads the run's figures back from the lake once this process has ended, so
that reading is no part of the cold wall.

With ROWS2.json (the warm mode) it then calls evaluate() on those rows (fresh texts, the model and
Prefect warm: `warm_call`) and once more on the very same rows (every vector cached: `cached_call`).
"""

import time

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the working tree's raglake (see _common.py)

import raglake  # noqa: E402

IMPORTED = time.perf_counter() - T0


def _timed_call(rows: list[dict], lake: str, device: str) -> float:
    t0 = time.perf_counter()
    raglake.evaluate(rows, metrics="semantic_similarity", lake=lake, device=device)
    return time.perf_counter() - t0


def main(argv: list[str]) -> int:
    rows_path, lake, device, *warm = argv
    marks = {"import": IMPORTED}
    marks["call"] = _timed_call(json.loads(Path(rows_path).read_text(encoding="utf-8")), lake, device)
    marks["evaluate"] = time.perf_counter() - T0
    if warm:
        second = json.loads(Path(warm[0]).read_text(encoding="utf-8"))
        marks["warm_call"] = _timed_call(second, lake, device)
        marks["cached_call"] = _timed_call(second, lake, device)
    print(json.dumps(marks), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
