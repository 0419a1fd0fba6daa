"""Same input, like for like (issue 29, item 2): pytrec_eval given raglake's own JSONL files, parsed with the
standard library as a user would, against `raglake run` (the CLI, a whole process) and the library path on
the very same files, all three asked for P@10, RR and nDCG@10 only.

    python benchmarks/same_input.py [--cases 200000] [--orchestration prefect auto] [--repeat 1] [--keep DIR]

The data is benchmarks/scale.py's `write_replay` (seeded; 10 retrieved chunks a case, 2-4 gold supports,
~8 % unanswerable). Timed --repeat times (the best of each is compared; the machine is shared, so the
load average is printed before and after); each round runs 2 first, while this process is still small,
then 1 and 3:
1. pytrec_eval on the same JSONL: both files read line by line with `json.loads`; the qrels are grade 1 per
   gold support, the run the top 10 retrieved chunks of each capture (scores descending by rank); a chunk
   whose rel_path is a support's and whose heading path starts with the support's takes that support's
   docno (raglake's anchor rule: the same qrels and run as scale.py's TREC files); then
   `RelevanceEvaluator(qrels, {P_10, recip_rank, ndcg_cut_10}).evaluate(run)` and the means. Timed whole
   (parse included) and, for reference, the evaluator alone. Warmed up on 200 cases first (imports out).
2. `raglake run` through the CLI: `python -m raglake run --golden G --target replay:C --metrics
   precision_at_k,mrr_at_k,ndcg_at_k --k 10 --quiet --lake <fresh> --orchestration O` with this interpreter,
   once per --orchestration choice (auto: in-process for at most 2,000 cases with no Prefect API configured,
   so at 200k auto runs on Prefect too, on its temporary server). Its environment: PREFECT_HOME in the work
   folder, no PREFECT_API_URL (what a newcomer's machine has). Not warmed up: the wall of the whole process
   is the figure; the run's own stage_seconds and suite_seconds are read back from its lake, so that
   start-up, Prefect's server, landing and exit (wall - inputs - suite: the CLI reads the inputs before the
   flow's clock starts) are printed apart. When a Prefect run is measured, one 200-case Prefect run goes
   first in the fresh PREFECT_HOME (Prefect creates its database once; printed apart).
   Memory: every process of the run's tree (the CLI, Prefect's temporary server, raglake.golden_process) is
   found every 0.2 s and its VmHWM (peak RSS) read from /proc; the largest peak is printed with its
   process, and the kernel's figure for the whole tree beside it (wait4's ru_maxrss: the largest of the CLI
   and its waited-for descendants, which catches a peak in the last 0.2 s; but it also counts the child's
   memory before its exec, i.e. this process's peak: shown only when larger than that). Then (unless
   --no-again) the last --orchestration once more into the first round's lake: the same target's second run,
   whose summary compares two runs of every case (the peak RSS goal holds for it too).
3. The library path: scale.py's `raglake_to_parquet` restricted to the three metrics (columnar read,
   score_columnar, scores/labels/chunks/cases tables, staged Parquet writes). Warmed up like 1.
Printed: each time, CLI / pytrec_eval-on-the-same-JSONL (goal <= 5x at 200k), library / pytrec_eval, the
largest process's peak RSS (goal <= 2 GiB in every process at 1M), and the per-case agreement of the CLI's
lake and of the library's table with pytrec_eval (max |diff| <= 1e-9, else the exit status is 1).
Everything written goes in a work folder removed at the end (unless --keep). Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from _common import ROOT, max_rss_mib, work_folder

sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pytrec_eval  # noqa: E402
from scale import REFERENCE, K, agreement, raglake_to_parquet, write_replay  # noqa: E402

from raglake.metrics.registry import get_metric  # noqa: E402

METRICS = tuple(REFERENCE)  # precision_at_k, mrr_at_k, ndcg_at_k: P_10, recip_rank, ndcg_cut_10 at k = 10
AUTO_IN_PROCESS_MAX = 2000  # raglake's auto orchestration runs in process up to this many cases
POLL_S = 0.2
MIB = 2**20


# ---- 1. pytrec_eval on the same JSONL --------------------------------------------------------------------


def trec_inputs(golden: Path, captures: Path) -> tuple[dict, dict]:
    """qrels and run from raglake's JSONL with the standard library: grade 1 per gold support; the top 10
    of each capture by rank, scores descending; a chunk under a support's anchor takes its docno."""
    supports: dict[str, list[tuple[str, list[str], str]]] = {}
    qrels: dict[str, dict[str, int]] = {}
    with open(golden, encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            anchors = [(s["rel_path"], s["heading_path"], f"{s['rel_path']}#{'>'.join(s['heading_path'])}")
                       for s in case["gold_supports"]]  # fmt: skip
            supports[case["id"]] = anchors
            if anchors:
                qrels[case["id"]] = {key: 1 for _, _, key in anchors}
    run: dict[str, dict[str, float]] = {}
    with open(captures, encoding="utf-8") as f:
        for line in f:
            capture = json.loads(line)
            anchors = supports.get(capture["case_id"], [])
            top = sorted(capture["retrieved"], key=lambda c: c["rank"])[:K]
            docs: dict[str, float] = {}
            for j, chunk in enumerate(top):
                path, heading = chunk["rel_path"], chunk["heading_path"]
                docno = next((key for p, h, key in anchors if p == path and heading[: len(h)] == h), None)
                docs.setdefault(docno or f"{path}#{'>'.join(heading)}", float(K - j))
            run[capture["case_id"]] = docs
    return qrels, run


def pytrec_on_jsonl(paths: dict[str, Path]) -> tuple[float, float, dict, dict[str, float]]:
    """(whole seconds, evaluator-only seconds, per query, means)."""
    t0 = time.perf_counter()
    qrels, run = trec_inputs(paths["golden.jsonl"], paths["captures.jsonl"])
    t1 = time.perf_counter()
    per_query = pytrec_eval.RelevanceEvaluator(qrels, set(REFERENCE.values())).evaluate(run)
    means = {m: math.fsum(q[m] for q in per_query.values()) / len(per_query) for m in REFERENCE.values()}
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1, per_query, means


# ---- 3. the library path ---------------------------------------------------------------------------------


def library_path(paths: dict[str, Path], out: Path) -> tuple[float, dict[str, pa.Table], dict[str, float]]:
    """scale.raglake_to_parquet with the three metrics only: (seconds, tables, seconds by stage)."""
    out.mkdir(parents=True, exist_ok=True)
    return raglake_to_parquet(paths, out, [get_metric(name) for name in METRICS])


# ---- 2. the CLI, its process tree measured ----------------------------------------------------------------


def cli_env(work: Path) -> dict[str, str]:
    """A newcomer's environment: Prefect's home in the work folder, no Prefect API configured, offline."""
    env = {**os.environ, "PREFECT_HOME": str(work / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_PROFILES_PATH", None)
    return env


def cli_cmd(paths: dict[str, Path], lake: Path, orchestration: str) -> list[str]:
    return [
        sys.executable, "-m", "raglake", "run", "--golden", str(paths["golden.jsonl"]),
        "--target", f"replay:{paths['captures.jsonl']}", "--metrics", ",".join(METRICS), "--k", str(K),
        "--lake", str(lake), "--orchestration", orchestration, "--quiet",
    ]  # fmt: skip


def _label(pid: int, root: int) -> str:
    if pid == root:
        return "the CLI (raglake run)"
    try:
        cmd = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return f"pid {pid}"
    if "raglake.golden_process" in cmd:
        return "the golden-set side process (raglake.golden_process)"
    if "prefect.server.api.server" in cmd:
        return "Prefect's temporary server (uvicorn)"
    return cmd[:60] or f"pid {pid}"


def _hwm_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError):
        return 0


def run_measured(cmd: list[str], env: dict[str, str], log: Path) -> dict:
    """Run `cmd`; wall seconds, exit status, each process's peak RSS (VmHWM, MiB) by label, and wait4's
    ru_maxrss (MiB) for the tree. It runs in the log's folder (the work folder: no raglake.yaml of the
    caller's working folder applies)."""
    peaks: dict[int, list] = {}  # pid: [label, VmHWM KiB]
    done = threading.Event()
    own_hwm = _hwm_kib(os.getpid()) / 1024  # wait4's ru_maxrss counts it: the child's memory before its exec
    with open(log, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=log.parent, stdout=out, stderr=subprocess.STDOUT)
        root = proc.pid

        def poll() -> None:
            while not done.is_set():
                try:
                    kids = [k.pid for k in psutil.Process(root).children(recursive=True)]
                except psutil.Error:
                    kids = []
                for pid in (root, *kids):
                    hwm = _hwm_kib(pid)
                    entry = peaks.setdefault(pid, ["", 0])
                    if hwm:  # the label once its command has been exec'd (re-read while it may change)
                        entry[0], entry[1] = _label(pid, root), max(entry[1], hwm)
                done.wait(POLL_S)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _, status, usage = os.wait4(root, 0)  # the exact peak of the tree, the CLI included
        wall = time.perf_counter() - t0
        done.set()
        poller.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
    by_label: dict[str, float] = {}
    for label, hwm in peaks.values():
        if label:
            by_label[label] = max(by_label.get(label, 0.0), hwm / 1024)
    tree = usage.ru_maxrss / 1024
    return {"wall": wall, "rc": proc.returncode, "peaks": by_label, "tree_maxrss": tree, "own_at_spawn": own_hwm}


def lake_figures(lake: Path) -> dict[str, float]:
    """The run's suite_seconds and stage_seconds by stage, from its lake."""
    rows = duckdb.sql(
        f"SELECT metric, stage, value FROM read_parquet('{lake}/run_metrics/**/*.parquet')"
        " WHERE metric IN ('stage_seconds', 'suite_seconds')"
    ).fetchall()
    return {(stage or metric): value for metric, stage, value in rows}


def lake_scores(lake: Path) -> pa.Table:
    names = ", ".join(f"'{m}'" for m in METRICS)
    return duckdb.sql(
        f"SELECT case_id, metric, value, status FROM read_parquet('{lake}/scores/**/*.parquet')"
        f" WHERE metric IN ({names})"
    ).to_arrow_table()


def warm_prefect(work: Path) -> float:
    """One 200-case Prefect run in the fresh PREFECT_HOME (Prefect creates its database once): its wall."""
    paths = write_replay(_mkdir(work / "warm-cli"), 200, 1)
    got = run_measured(cli_cmd(paths, work / "warm-cli" / "lake", "prefect"), cli_env(work), work / "warm-cli.log")
    _check(got, work / "warm-cli.log")
    return got["wall"]


def _check(got: dict, log: Path) -> None:
    if got["rc"] != 0:
        print(log.read_text(errors="replace")[-4000:])
        raise SystemExit(f"raglake run exited {got['rc']} (log above)")


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# ---- the run and its report ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200_000, help="cases (200000 for the ratio goal, 1000000 for RSS)")
    ap.add_argument("--seed", type=int, default=20240612)
    ap.add_argument(
        "--orchestration", nargs="+", default=["prefect", "auto"], choices=("prefect", "auto", "in-process"),
        help="the CLI runs measured, one per choice (default: prefect auto)",
    )  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="timed rounds, each path once a round (default 1)")
    ap.add_argument("--keep", type=Path, help="work here and leave it (default: a temp folder, removed)")
    ap.add_argument(
        "--no-again", dest="again", action="store_false",
        help="skip the second run of the target into the first round's lake (its summary compares two runs)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    with work_folder(args.keep, "raglake-same-input-") as work:
        return bench(args, work)


def bench(args: argparse.Namespace, work: Path) -> int:
    t0 = time.perf_counter()
    paths = write_replay(_mkdir(work / "data"), args.cases, args.seed)
    sizes = {name: p.stat().st_size / MIB for name, p in paths.items()}
    print(f"raglake same input: {args.cases:,} cases x 10 chunks, k = {K}, P@10, RR and nDCG@10 only; python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs; golden {sizes['golden.jsonl']:.0f} MiB, captures "
          f"{sizes['captures.jsonl']:.0f} MiB of JSONL (written in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
    warm = write_replay(_mkdir(work / "warm"), 200, args.seed + 1)
    pytrec_on_jsonl(warm)  # imports and first calls out of both in-process paths
    library_path(warm, work / "warm" / "staged")
    if any(o == "prefect" or (o == "auto" and args.cases > AUTO_IN_PROCESS_MAX) for o in args.orchestration):
        first_s = warm_prefect(work)
        print(f"first Prefect run in the fresh PREFECT_HOME (200 cases, its database created): {first_s:.1f} s"
              " (once per PREFECT_HOME; not in the figures below)")  # fmt: skip
    load_before = os.getloadavg()
    trec, lib, cli, again = [], [], {o: [] for o in args.orchestration}, None
    for i in range(args.repeat):  # the CLI first: wait4's figure counts this process's peak at the spawn
        for o in args.orchestration:
            lake = work / f"lake-{o}-{i}"
            got = run_measured(cli_cmd(paths, lake, o), cli_env(work), work / f"cli-{o}-{i}.log")
            _check(got, work / f"cli-{o}-{i}.log")
            cli[o].append({**got, "lake": lake, "figures": lake_figures(lake)})
        if i == 0 and args.again:  # the same target again, into the same lake: its summary compares two runs
            o = args.orchestration[-1]
            log = work / "cli-again.log"
            again = run_measured(cli_cmd(paths, work / f"lake-{o}-0", o), cli_env(work), log)
            _check(again, log)
            again["orchestration"] = o
        gc.collect()
        total_s, eval_s, per_query, means = pytrec_on_jsonl(paths)
        trec.append((total_s, eval_s))
        gc.collect()
        lib_s, tables, split = library_path(paths, work / "staged")
        lib.append((lib_s, split))
        scores, tables = tables["scores"], None
        gc.collect()
    load_after = os.getloadavg()
    agree = {"library path": agreement(scores, per_query)}
    agree.update({f"CLI ({o})": agreement(lake_scores(runs[-1]["lake"]), per_query) for o, runs in cli.items()})
    report(args, trec, lib, cli, means, agree, (load_before, load_after), again)
    return 0 if all(d <= 1e-9 for a in agree.values() for d, _, _ in a.values()) else 1


def _load(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg) + f" (1, 5, 15 min; {os.cpu_count()} CPUs)"


def report(args, trec, lib, cli, means, agree, loads, again=None) -> None:
    n, w = args.cases, 100
    trec_s, eval_s = min(trec)
    lib_s, split = min(lib, key=lambda x: x[0])
    print("=" * w)
    print(f"load before: {_load(loads[0])}")
    print(f"{'pytrec_eval on the same JSONL':<44}{trec_s:>8.2f} s  (json.loads parse + qrels/run "
          f"{trec_s - eval_s:.2f} s, evaluator and means alone {eval_s:.2f} s)")  # fmt: skip
    print(f"{'library path (3 metrics, staged Parquet)':<44}{lib_s:>8.2f} s  "
          f"({', '.join(f'{k} {v:.2f}' for k, v in split.items())})")  # fmt: skip
    largest = ("", 0.0)
    for o, runs in cli.items():
        best = min(runs, key=lambda r: r["wall"])
        largest = max(largest, *best["peaks"].items(), key=lambda kv: kv[1])
        print_cli(o, best, n)
    if again is not None:
        largest = max(largest, *again["peaks"].items(), key=lambda kv: kv[1])
        ranked = sorted(again["peaks"].items(), key=lambda kv: -kv[1])
        peaks = "; ".join(f"{label} {mib:,.0f} MiB" for label, mib in ranked)
        print(f"{'raglake run again, same target and lake':<44}{again['wall']:>8.2f} s  (--orchestration "
              f"{again['orchestration']}; its summary compares two {n:,}-case runs)")  # fmt: skip
        print(f"    peak RSS (VmHWM, polled every {POLL_S} s): {peaks}")
    print("-" * w)
    for o, runs in cli.items():
        wall = min(r["wall"] for r in runs)
        print(f"CLI --orchestration {o} / pytrec_eval on the same JSONL: {wall / trec_s:6.2f} x  (goal <= 5x at 200k)")
    print(f"library path / pytrec_eval on the same JSONL:   {lib_s / trec_s:6.2f} x")
    print(f"library path / pytrec_eval's evaluator alone:   {lib_s / eval_s:6.2f} x  (for reference: no parse)")
    print(f"largest process's peak RSS: {largest[1]:,.0f} MiB, {largest[0]} (goal <= 2048 MiB in every process at 1M)")
    print(f"this benchmark's own process peaked at {max_rss_mib():,.0f} MiB (pytrec_eval's dicts, the library path)")
    print("-" * w)
    print(
        f"{'per case, max |diff| vs pytrec_eval':<38}"
        + "".join(f"{m:>16}" for m in REFERENCE)
        + "   compared, one side only"
    )
    for name, a in agree.items():
        print(
            f"{name:<38}"
            + "".join(f"{a[m][0]:>16.1e}" for m in REFERENCE)
            + f"   {a[METRICS[0]][1]:,}, {sum(x[2] for x in a.values()):,}"
        )
    print(f"{'pytrec_eval means':<38}" + "".join(f"{means[t]:>16.6f}" for t in REFERENCE.values()))
    worst = max(d for a in agree.values() for d, _, _ in a.values())
    print(f"agreement to 1e-9: {'OK' if worst <= 1e-9 else 'MISMATCH'} (max |diff| {worst:.1e})")
    print(f"load after:  {_load(loads[1])}")
    print("=" * w)


def print_cli(orchestration: str, run: dict, n: int) -> None:
    """One CLI run: wall, where it went (the run's stage_seconds), each process's peak RSS."""
    fig = dict(run["figures"])
    suite, inputs = fig.pop("suite_seconds", math.nan), fig.get("inputs", math.nan)
    on_prefect = any("Prefect" in label for label in run["peaks"])
    how = "on Prefect's temporary server" if on_prefect else "in process, no Prefect server"
    if orchestration == "auto":
        how = f"{how}: auto {'> ' if n > AUTO_IN_PROCESS_MAX else '<= '}{AUTO_IN_PROCESS_MAX:,} cases"
    print(f"{f'raglake run --orchestration {orchestration}':<44}{run['wall']:>8.2f} s  ({how})")
    print(f"    stages (s): {', '.join(f'{k} {v:.2f}' for k, v in fig.items())}; suite_seconds {suite:.2f}"
          f" (inputs are read before it); outside inputs + suite (start-up, Prefect's server, landing, the"
          f" summary, exit): {run['wall'] - suite - inputs:.2f}")  # fmt: skip
    peaks = sorted(run["peaks"].items(), key=lambda kv: -kv[1])
    kernel = (
        f"{run['tree_maxrss']:,.0f} MiB"
        if run["tree_maxrss"] > run["own_at_spawn"]
        else f"not informative (no more than this benchmark's own peak at the spawn, {run['own_at_spawn']:,.0f} MiB)"
    )
    print(f"    peak RSS (VmHWM, polled every {POLL_S} s): "
          f"{'; '.join(f'{label} {mib:,.0f} MiB' for label, mib in peaks)}; the kernel's largest of the tree"
          f" (wait4 ru_maxrss, which also counts the child before its exec) {kernel}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
