"""The README's live-service walkthrough ("Evaluating a live service" → "Try it"), run as it is written:
its bash block, in order, in a scratch folder that holds the checkout's `.venv` and `data` (so the
lake and the config it writes stay out of the repository). Then what it landed is checked against
the faults it asked for, computed here from the serve-demo flags in the block: every question once,
each with the injected status and the attempts the retry rules give, and no secret in the lake."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from raglake.demo.app import Faults, questions_of, share
from raglake.golden import load_golden
from raglake.pipeline.lakes import open_lake
from tests.conftest import ROOT
from tests.httpkit import SAMPLE_GOLDEN, expected_attempts, expected_status, free_port

MARKER = "<!-- tests/test_readme_live_service.py runs this block as it is, in order -->"


def walkthrough() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(MARKER)
    return re.search(r"```bash\n(.*?)```", text[start:], flags=re.S).group(1)


def demo_faults(script: str) -> Faults:
    """The Faults the block's `raglake serve-demo` line asks for (its --x-rate, --hang-s and --seed), over the
    questions it expects (--questions, default the sample golden set)."""
    line = re.search(r"raglake serve-demo (.*?)&\n", script.replace("\\\n", " "), flags=re.S).group(1)
    args = shlex.split(line)
    options = {args[i].lstrip("-").replace("-", "_"): args[i + 1] for i in range(0, len(args), 2)}
    fields = ("error_rate", "timeout_rate", "empty_rate", "malformed_rate", "flaky_rate", "hang_s", "seed")
    questions = questions_of(str(ROOT / options.get("questions", "data/golden/sample.jsonl")))
    return Faults(
        **{k: float(v) if k != "seed" else int(v) for k, v in options.items() if k in fields}, questions=questions
    )


@pytest.mark.e2e
def test_the_live_service_walkthrough_runs_in_order(tmp_path: Path) -> None:
    script = walkthrough()
    port = free_port()
    assert script.count("8765") >= 3  # the service, the wait and the config all use the one port
    for link in (".venv", "data"):
        (tmp_path / link).symlink_to(ROOT / link)
    lake = tmp_path / "lake"
    env = {**os.environ, "RAGLAKE_LAKE": str(lake), "COLUMNS": "200"}
    env.pop("PREFECT_API_URL", None)  # the commands start their own, as a user's would
    stop_demo = "trap 'kill $(jobs -p) 2>/dev/null' EXIT\n"  # a failing step must not leave the service running
    done = subprocess.run(
        ["bash", "-e", "-c", stop_demo + script.replace("8765", str(port))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = " ".join(done.stdout.split())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    faults = demo_faults(script)
    config = yaml.safe_load((tmp_path / "demo-faults.yaml").read_text())
    golden = load_golden(SAMPLE_GOLDEN)
    kinds = Counter(faults.fault_for(c.question) for c in golden.cases)
    assert all(kinds[k] for k in ("error", "timeout", "empty", "malformed")), kinds  # every fault happens
    assert kinds["error"] == share(faults.error_rate, len(golden.cases))  # the README's "7 of the 66"

    q = open_lake(str(lake))
    (run_id,) = q.run_ids(["latest"])
    rows = q.con.sql(
        "SELECT case_id, question, capture_status, capture_attempts FROM cases WHERE run_id = $r", params={"r": run_id}
    ).fetchall()
    assert sorted(r[0] for r in rows) == sorted(c.id for c in golden.cases)  # every question exactly once
    for case_id, question, status, attempts in rows:
        assert status == expected_status(faults, question), case_id
        assert attempts == expected_attempts(faults, question, config["retries"]), case_id

    # what the block printed: the run and its failure rates, health by category, the SQL, the coverage
    n = len(golden.cases)
    assert f"landed run(s): {run_id}" in out and "demo-faults" in run_id
    for figure, count in (("error_rate", kinds["error"] + kinds["malformed"]), ("timeout_rate", kinds["timeout"])):
        assert re.search(rf"{figure} │ +│ {count / n:.3f} │ {n} │", out), figure
    assert "capture health by category" in out and f"index coverage · run {run_id}" in out
    attempts = Counter((s, a) for _, _, s, a in rows)
    for (status, tries), count in attempts.items():
        assert re.search(rf"│ {status} +│ +{tries} │ +{count} │", out), (status, tries, count)

    token = re.search(r"export DEMO_TOKEN=(\S+)", script).group(1).encode()
    assert [p for p in lake.rglob("*") if p.is_file() and token in p.read_bytes()] == []
