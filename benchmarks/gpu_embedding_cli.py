"""`raglake run --device DEVICE` itself on the inputs benchmarks/gpu_embedding.py staged (issue 29, item 3:
"the CLI with --device cuda on 20,000 cases"): the staged canonical lines as a golden file and a replay
file, the vector metrics, a fresh lake and vector cache each run, in process (the lent machine has no
Prefect; the flow's tasks are the same). What the run recorded (run_metrics' stage_seconds and
embedding_texts, read with pyarrow) goes beside the raw encode of the same texts, measured in the
benchmark's own process on the same model folder and device. The command runs outside the checkout, so
raglake must be installed where it runs (a checkout alone lacks raglake.sql, raglake.flows and
raglake.tasks; on a lent machine: `pip install --no-deps --no-build-isolation --target DIR .` and DIR on
PYTHONPATH). Nothing here asserts on time."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds


def _concatenate(paths: list[Path], dest: Path) -> Path:
    with dest.open("wb") as out:
        for path in paths:
            out.write(path.read_bytes())
    return dest


def _recorded(lake: Path) -> dict[str, float]:
    table = ds.dataset(lake / "run_metrics", format="parquet", partitioning="hive").to_table(
        columns=["metric", "stage", "value"]
    )
    keep = pc.is_in(table.column("metric"), value_set=pc.cast(["stage_seconds", "embedding_texts"], "string"))
    rows = table.filter(keep).to_pylist()
    return {f"{r['metric']}.{r['stage']}": r["value"] for r in rows}


def run_cli(paths, model_folder: Path, device: str, metrics: list[str], k: int, repeat: int) -> dict:  # noqa: ANN001
    """`repeat` runs of the CLI; their walls and recorded stages (or the failure's output)."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="raglake-gpu-cli-") as tmp:
        golden = _concatenate([c for c, _ in paths], Path(tmp) / "golden.jsonl")
        replay = _concatenate([x for _, x in paths], Path(tmp) / "captures.jsonl")
        for rep in range(repeat):
            lake, cache = Path(tmp) / f"lake-{rep}", Path(tmp) / f"cache-{rep}"
            cmd = [sys.executable, "-m", "raglake", "run", "--golden", str(golden), "--target", f"replay:{replay}"]
            cmd += ["--lake", str(lake), "--k", str(k), "--metrics", ",".join(metrics), "--device", device]
            cmd += ["--embedder", str(model_folder), "--orchestration", "in-process", "-q"]
            env = {**os.environ, "RAGLAKE_CACHE": str(cache), "COLUMNS": "200"}
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
            wall = time.perf_counter() - t0
            if done.returncode != 0:
                return {"failed": done.returncode, "output": (done.stdout + done.stderr)[-3000:], "command": cmd}
            runs.append({"wall": wall} | _recorded(lake))
            print(
                f"CLI run {rep + 1}/{repeat}: wall {wall:.1f} s, embedding stage "
                f"{runs[-1].get('stage_seconds.embedding', float('nan')):.2f} s, scoring stage "
                f"{runs[-1].get('stage_seconds.scoring', float('nan')):.2f} s",
                flush=True,
            )
    return {"runs": runs, "metrics": metrics}


def cli_lines(cli: dict, raw_best: float, width: int) -> list[str]:
    """The CLI's block of the report: its stages, best of its runs, against (a)'s best."""
    if not cli:
        return []
    if "failed" in cli:
        return ["-" * width, f"raglake run failed ({cli['failed']}): {' '.join(cli['command'])}", cli["output"]]
    runs = cli["runs"]

    def best(key: str) -> float:
        return min(r.get(key, float("nan")) for r in runs)

    embedding = best("stage_seconds.embedding")
    lines = ["-" * width, f"raglake run --device ... --orchestration in-process, {len(runs)} runs (best of each):"]
    lines.append(f"{'  wall of the command':<54}{best('wall'):>9.2f} s")
    for stage in ("inputs", "capture", "embedding", "embedding_encode", "scoring", "judge"):
        if f"stage_seconds.{stage}" in runs[0]:
            lines.append(f"{'  stage ' + stage:<54}{best('stage_seconds.' + stage):>9.2f} s")
    lines.append(
        f"{'  texts: distinct / encoded':<54}{runs[0].get('embedding_texts.distinct', float('nan')):>9,.0f} / "
        f"{runs[0].get('embedding_texts.encoded', float('nan')):,.0f}"
    )
    lines.append(
        f"{'  throughput CLI embedding stage / (a), best':<54}{raw_best / embedding:>9.3f}    goal >= 0.8: "
        f"{'met' if raw_best / embedding >= 0.8 else 'NOT met'}"
    )
    encode = best("stage_seconds.embedding_encode")
    lines.append(
        f"{'  throughput CLI model calls (embedding_encode) / (a)':<54}{raw_best / encode:>9.3f}    (the stage less "
        "the wait for the model's load and the reading)"
    )
    return lines
