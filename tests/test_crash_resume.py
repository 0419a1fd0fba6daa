"""kill -9 at every stage of `raglake run` (capture, embedding, judge, scoring, landing), then a retry
with the same run id and other --k / --metrics (issue 10): the run lands whole, with exactly one row
per case × metric and only the retry's metrics, nothing of the killed attempt is visible, and judge
calls the killed attempt already flushed to the ledger are not paid again.

The killed attempt runs the CLI in a subprocess through tests/crashkit.py, which rigs one function to
SIGKILL its own process; the retry runs the CLI's entry point in this process; every run reports to the
session's Prefect test server (no ephemeral server per process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raglake.lake.query import connect, fetch, scalar
from raglake.lake.store import Lake
from tests.conftest import ROOT
from tests.fake_openai import FakeOpenAI

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("prefect_harness")]

N_CASES = 30  # more than one ledger flush (25 calls)
FLUSH_EVERY = 25  # raglake.judge.ledger.JudgeLedger's default
JUDGE_KILL_AT = 27  # the 27th judge call is paid, then the process dies before recording it
CRASHKIT = str(Path(__file__).resolve().parent / "crashkit.py")


def write_inputs(folder: Path, n: int = N_CASES) -> tuple[str, str]:
    """A golden set of n answerable cases and a replay file of their captures (two chunks each)."""
    folder.mkdir(parents=True, exist_ok=True)
    golden, captures = [], []
    for i in range(1, n + 1):
        golden.append(
            {
                "id": f"k{i}",
                "question": f"What does service {i} store?",
                "tags": ["crash"],
                "reference_answer": f"Service {i} stores ledger entries of kind {i}.",
                "gold_supports": [{"rel_path": f"svc/{i}.md", "heading_path": "Storage"}],
            }
        )
        captures.append(
            {
                "case_id": f"k{i}",
                "method": "m1",
                "answer": f"It stores kind {i} ledger entries [1].",
                "retrieved": [
                    {
                        "rank": 1 + i % 2,
                        "rel_path": f"svc/{i}.md",
                        "heading_path": "Storage > Kinds",
                        "text": f"Service {i} keeps kind {i} entries.",
                    },
                    {"rank": 2 - i % 2, "rel_path": "svc/other.md", "heading_path": "Other", "text": "Unrelated."},
                ],
            }
        )
    g, c = folder / "golden.jsonl", folder / "captures.jsonl"
    g.write_text("".join(json.dumps(x) + "\n" for x in golden))
    c.write_text("".join(json.dumps(x) + "\n" for x in captures))
    return str(g), f"replay:{c}"


@dataclass
class World:
    lake: str
    golden: str
    target: str
    env: dict[str, str]
    judge: FakeOpenAI

    def raglake(self, *args: str, crash: tuple[str, int] | None = None) -> subprocess.CompletedProcess:
        head = [sys.executable, CRASHKIT, crash[0], str(crash[1])] if crash else [sys.executable, "-m", "raglake"]
        return subprocess.run(
            [*head, *args], check=False, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=300
        )

    def retry_here(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
        """`raglake ARGS` in this process (the console script's own entry point) with the subprocesses'
        cache and judge key: the killed process is gone, so a retry starts from what is on disk either
        way, and this process has Prefect and the models' libraries imported already (seconds less a
        scenario than a fresh interpreter). Its exit code and output."""
        from raglake.cli import main

        for key in ("RAGLAKE_CACHE", "OPENAI_API_KEY"):
            monkeypatch.setenv(key, self.env[key])
        monkeypatch.setattr(sys, "argv", ["raglake", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        captured = capsys.readouterr()
        return exited.value.code or 0, captured.out + captured.err

    def run_args(self, run_id: str, k: int, metrics: list[str], judged: bool) -> list[str]:
        args = [
            "run",
            "--golden",
            self.golden,
            "--target",
            self.target,
            "--lake",
            self.lake,
            "--run-id",
            run_id,
            "--k",
            str(k),
            "--metrics",
            ",".join(metrics),
            "--batch-size",
            "10",
            "--quiet",
        ]
        if judged:
            args += ["--judge-base-url", self.judge.url, "--judge-model", "gpt-4o-mini", "--judge-concurrency", "1"]
        return args


@pytest.fixture(scope="module")
def world(tmp_path_factory, prefect_harness):
    from prefect.settings import get_current_settings

    folder = tmp_path_factory.mktemp("crash")
    golden, target = write_inputs(folder / "inputs")
    env = {
        **os.environ,
        "PREFECT_API_URL": str(get_current_settings().api.url),
        "RAGLAKE_CACHE": str(folder / "cache"),  # a cold vector cache: the embedding stage has work to do
        "OPENAI_API_KEY": "sk-crash-test",
    }
    env.pop("RAGLAKE_LAKE", None)
    with FakeOpenAI() as judge:
        yield World(str(folder / "lake"), golden, target, env, judge)


# stage -> (kill at the n-th call, the killed attempt's k and metrics, the retry's k and metrics)
SCENARIOS = {
    "capture": (2, 5, ["recall_any_at_k", "mrr_at_k"], 3, ["recall_any_at_k", "ndcg_at_k"]),
    "embedding": (1, 5, ["semantic_similarity", "mrr_at_k"], 3, ["semantic_similarity", "recall_any_at_k"]),
    "judge": (JUDGE_KILL_AT, 5, ["wp_relevance", "recall_any_at_k", "mrr_at_k"], 3, ["wp_relevance", "precision_at_k"]),
    "scoring": (2, 5, ["recall_any_at_k", "mrr_at_k"], 3, ["recall_any_at_k", "precision_at_k"]),  # 2nd batch
    "landing": (1, 5, ["recall_any_at_k", "mrr_at_k"], 3, ["recall_any_at_k"]),
}


def _raw_score_pairs(lake: str, run_id: str) -> list[tuple[str, str]]:
    """(case, metric) of every row in the run's scores partition, read without the lake's views."""
    folder = Path(lake) / "scores" / f"run_id={run_id}"
    return [
        (r["case_id"], r["metric"])
        for f in sorted(folder.glob("*.parquet"))
        for r in pq.read_table(f, columns=["case_id", "metric"]).to_pylist()
    ]


def _judge_calls(lake: str, run_id: str) -> int:
    return scalar(connect(Lake(lake)), "SELECT count(*) FROM judge_calls WHERE run_id = $r", r=run_id)


@pytest.mark.parametrize("stage", list(SCENARIOS))
def test_kill_9_then_retry_lands_the_retry_whole(world: World, stage: str, monkeypatch, capsys) -> None:
    nth, k1, metrics1, k2, metrics2 = SCENARIOS[stage]
    run_id = f"r-crash-{stage}"
    judged = stage == "judge"
    paid_before = world.judge.count

    killed = world.raglake(*world.run_args(run_id, k1, metrics1, judged), crash=(stage, nth))
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stdout[-2000:], killed.stderr[-4000:])
    con = connect(Lake(world.lake))
    assert scalar(con, "SELECT count(*) FROM runs WHERE run_id = $r", r=run_id) == 0
    assert scalar(con, "SELECT count(*) FROM scores WHERE run_id = $r", r=run_id) == 0  # nothing visible
    paid_killed, flushed = world.judge.count - paid_before, _judge_calls(world.lake, run_id)

    code, out = world.retry_here(monkeypatch, capsys, *world.run_args(run_id, k2, metrics2, judged))
    assert code == 0, out[-4000:]
    paid_retry = world.judge.count - paid_before - paid_killed

    pairs = _raw_score_pairs(world.lake, run_id)
    assert len(pairs) == len(set(pairs)) == N_CASES * len(metrics2)  # one row per case × metric, raw files
    assert {m for _, m in pairs} == set(metrics2)  # no stale metric
    con = connect(Lake(world.lake))
    assert fetch(
        con,
        "SELECT count(*), count(DISTINCT case_id || '|' || metric), "
        "list(DISTINCT metric ORDER BY metric) FROM scores WHERE run_id = $r",
        r=run_id,
    ) == [(len(pairs), len(pairs), sorted(metrics2))]
    assert fetch(con, "SELECT count(*), count(DISTINCT case_id) FROM cases WHERE run_id = $r", r=run_id) == [
        (N_CASES, N_CASES)
    ]  # no case lost or duplicated
    ((k, versions),) = fetch(con, "SELECT k, metric_version_map FROM runs WHERE run_id = $r", r=run_id)
    recorded = set(versions)
    assert k == k2 and set(metrics2) <= recorded and not (set(metrics1) - set(metrics2)) & recorded
    assert (
        scalar(con, "SELECT count(*) FROM scores WHERE run_id = $r AND status NOT IN ('ok', 'undefined')", r=run_id)
        == 0
    )
    leftovers = [str(p) for p in Path(world.lake).rglob(f"*{run_id}*") if p.name.endswith(".tmp")]
    leftovers += [str(p) for p in (Path(world.lake) / "scores" / f"run_id={run_id}").glob(".*")]
    assert not leftovers

    if judged:  # paid calls: the flushed ones are reused, only the unflushed tail is paid twice
        print(
            f"judge: killed attempt paid {paid_killed}, flushed {flushed}; retry paid {paid_retry}; "
            f"paid twice {paid_killed + paid_retry - N_CASES}"
        )
        assert paid_killed == JUDGE_KILL_AT and flushed == FLUSH_EVERY * (JUDGE_KILL_AT // FLUSH_EVERY)
        assert paid_retry == N_CASES - flushed
        assert paid_killed + paid_retry - N_CASES == JUDGE_KILL_AT - flushed < FLUSH_EVERY
