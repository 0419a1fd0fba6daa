"""The command line as a user runs it: `raglake run` then `raglake breakdown`, and bad input that
stops before anything lands."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.plan import SAMPLE_CAPTURES
from tests.conftest import FIXTURES, ROOT
from tests.lakekit import land
from tests.readmekit import FirstSteps
from tests.test_golden import BAD

RAGLAKE = [sys.executable, "-m", "raglake"]


def _row(rows: list[dict], **match) -> dict:
    (found,) = [r for r in rows if all(r[k] == v for k, v in match.items())]
    return found


def _run(*args: str, lake: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGLAKE_LAKE": lake, "COLUMNS": "200"}
    done = subprocess.run([*RAGLAKE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"raglake {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.mark.e2e
def test_main_job_evaluates_the_builtin_target_with_coverage(readme_first_steps: FirstSteps) -> None:
    """`raglake run` with no arguments is `make run`: the builtin RAG over data/corpus, live. Checked on
    the lake of the README's first steps, whose first command is that `raglake run` (tests/readmekit.py:
    the session evaluates the builtin target once, not once per test)."""
    lake = readme_first_steps.lake
    out = readme_first_steps.output(".venv/bin/raglake run")  # the first step: no arguments
    (run_id,) = re.search(r"landed run\(s\): (\S+)", out).groups()
    assert "builtin" in run_id and "recall_any_at_k" in out and "no_chunks_rate" in out
    q = open_lake(lake)
    recall = _row(q.breakdown([run_id], "answerable"), slice="answerable", metric="recall_any_at_k")
    golden = load_golden(ROOT / "data" / "golden" / "sample.jsonl")
    assert recall["n"] == sum(c.answerable for c in golden.cases) and recall["mean"] is not None
    abstain = _row(q.breakdown([run_id], "all"), metric="abstention_accuracy")
    assert abstain["n"] == sum(not c.answerable for c in golden.cases) and abstain["mean"] > 0.5

    coverage = {(r["stat"], r["doc_type"], r["reason"]): r["value"] for r in q.coverage(run_id)}
    corpus = ROOT / "data" / "corpus"
    files = [p for p in corpus.rglob("*") if p.is_file()]
    markdown = [p for p in files if p.suffix == ".md"]
    assert coverage[("docs_seen", None, None)] == len(files)
    assert coverage[("docs", ".md", None)] == len(markdown) == coverage[("docs_processed", None, None)]
    assert coverage[("docs_not_indexed", None, "unsupported_type")] == len(files) - len(markdown)
    empty = [p for p in markdown if not p.read_text().strip() or p.read_text().strip().endswith("---")]
    assert coverage[("docs_with_zero_chunks", None, None)] == len(empty) >= 2
    assert (
        coverage[("chunks_embedded", None, None)] + coverage[("chunks_skipped", None, None)]
        == coverage[("chunks_attempted", None, None)]
    )
    index_version = q.index_versions([run_id])[run_id]
    assert index_version and {r["index_version"] for r in q.coverage(run_id)} == {index_version}
    # `raglake coverage` (run after the replayed runs, which have no manifest) shows this run's manifest
    out = readme_first_steps.output(".venv/bin/raglake coverage")
    assert "unsupported_type" in out and index_version in out


@pytest.mark.e2e
def test_two_replayed_methods_then_breakdown_sql_and_compare(readme_first_steps: FirstSteps) -> None:
    """The two replayed methods as the README's first steps land them (after the builtin run, on the same
    lake: tests/readmekit.py), their breakdowns and runs as printed there; then SQL and a per-category
    comparison of the two, run here against that lake."""
    lake = readme_first_steps.lake
    out = readme_first_steps.output(".venv/bin/raglake run --target")
    (command,) = [c for c, _ in readme_first_steps.outputs if c.startswith(".venv/bin/raglake run --target")]
    assert re.findall(r"--target (\S+)", command) == list(SAMPLE_CAPTURES)  # the sample's two methods, in order
    run_ids = re.search(r"landed run\(s\): (\S+) (\S+)", out).groups()
    assert "basic_search" in run_ids[0] and "local_search" in run_ids[1]
    assert "recall_any_at_k" in out and "error_rate" in out and "95% CI" in out
    assert len(Lake(lake).files("runs")) == 3  # the builtin run before them, and these two

    out = readme_first_steps.output(".venv/bin/raglake breakdown --by category")
    assert "breakdown by category" in out and "multi_hop" in out and "recency_conflict" in out
    out = readme_first_steps.output(".venv/bin/raglake breakdown --by target")
    assert "basic_search" in out and "local_search" in out

    out = _run(
        "sql",
        "SELECT run_id, count(DISTINCT case_id) AS n FROM cases GROUP BY run_id ORDER BY run_id",
        "--json",
        lake=lake,
    ).stdout
    golden_cases = len((ROOT / "data" / "golden" / "sample.jsonl").read_text().strip().splitlines())
    counts = {row["run_id"]: row["n"] for row in map(json.loads, out.splitlines())}
    assert {counts[r] for r in run_ids} == {golden_cases} and len(counts) == 3

    out = _run("compare", run_ids[0], run_ids[1], "--by", "category", lake=lake).stdout
    assert "category=multi_hop" in out
    out = readme_first_steps.output(".venv/bin/raglake runs")
    assert "runs" in out and out.count("│ completed │") == 3  # a row per run, newest first:
    assert out.index("│ local_search │") < out.index("│ basic_search │") < out.index("│ builtin │")


@pytest.mark.e2e
def test_the_readme_runs_print_their_verdict_first(readme_first_steps: FirstSteps) -> None:
    """Issue 27: `make run` on a fresh lake and the two replayed methods print the verdict within their
    first 15 lines of standard output (the progress bars go to stderr), in one or two lines: the first
    run says there is nothing to compare with yet, the two methods say how B did against A, each
    difference with its labelled 95% CI."""
    first = readme_first_steps.lines(".venv/bin/raglake run")[:15]
    (at,) = [i for i, line in enumerate(first) if line.startswith("verdict")]
    assert "first run of builtin" in " ".join(first[at : at + 2])
    two = readme_first_steps.lines(".venv/bin/raglake run --target")[:15]
    (at,) = [i for i, line in enumerate(two) if line.startswith("verdict")]
    verdict = " ".join(" ".join(two[at : at + 2]).split())
    assert "B = local_search against A = basic_search" in verdict and "95% CI [" in verdict
    assert "Slices:" in verdict


@pytest.mark.e2e
def test_bad_golden_file_exits_2_with_file_line_field_and_lands_nothing(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    bad = tmp_path / "golden.jsonl"
    bad.write_text('{"id": "a", "question": "q"}\n{"id": "b", "question": "r", "difficulty": "hardd"}\n')
    done = _run(
        "run", "--golden", str(bad), "--target", f"replay:{FIXTURES / 'mini_captures.jsonl'}", lake=lake, check=False
    )
    assert done.returncode == 2
    assert f"{bad}:2: field 'difficulty': unknown difficulty 'hardd' (did you mean 'hard'?)" in " ".join(
        done.stdout.split()
    )
    assert not Path(lake).exists()


@pytest.mark.e2e
def test_unknown_names_get_suggestions(tmp_path: Path) -> None:
    lake = str(tmp_path / "lake")
    done = _run("run", "--target", "replya:x.jsonl", lake=lake, check=False)
    assert done.returncode == 2 and "did you mean 'replay'" in done.stdout
    done = _run("run", "--metrics", "recall_any_at_5", lake=lake, check=False)
    assert done.returncode == 2 and "did you mean 'recall_any_at_k'" in done.stdout


@pytest.mark.parametrize(("name", "text", "line", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_every_bad_golden_file_leaves_an_existing_lake_untouched(
    tmp_path: Path, name: str, text: str, line: int, field: str | None, words: str
) -> None:
    from typer.testing import CliRunner

    from raglake.cli import app

    lake = str(tmp_path / "lake")
    land(lake, str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-before")
    before = {p: p.read_bytes() for p in Path(lake).rglob("*") if p.is_file()}
    bad = tmp_path / name
    bad.write_text(text)
    result = CliRunner().invoke(
        app, ["run", "--golden", str(bad), "--target", f"replay:{FIXTURES / 'mini_captures.jsonl'}", "--lake", lake]
    )
    assert isinstance(result.exception, InputError)
    assert str(result.exception).startswith(f"{bad}:{line}:") and words in str(result.exception)
    assert result.exception.field == field
    assert {p: p.read_bytes() for p in Path(lake).rglob("*") if p.is_file()} == before


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """`raglake ARGS` in this process (the console script's own entry point): exit code and output."""
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return exited.value.code or 0, " ".join(capsys.readouterr().out.split())


def test_breakdown_and_trend_refuse_unknown_metrics_and_targets(tmp_path: Path, monkeypatch, capsys) -> None:
    lake = str(tmp_path / "lake")
    land(lake, str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-mini")
    recall = "unknown metric 'recall_any_at_5' (did you mean 'recall_any_at_k'?)"
    cases = (
        (("breakdown", "-m", "recall_any_at_5"), recall),
        (("breakdown", "--long", "-m", "mrr_at_k,mrr_at_kk"), "metric 'mrr_at_kk' (did you mean 'mrr_at_k'?)"),
        (("trend", "--metric", "recall_any_at_5"), recall),
        (("trend", "--target", "m11"), "unknown target 'm11' (did you mean 'm1'?)"),
    )
    for args, words in cases:
        code, out = _main(monkeypatch, capsys, *args, "--lake", lake)
        assert code == 2 and out.startswith("error:") and words in out, (args, out)
    code, out = _main(monkeypatch, capsys, "breakdown", "-m", "recall_any_at_k", "--lake", lake)
    assert code == 0 and "recall any at k" in out


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_run_loads_and_checks_each_input_once(tmp_path: Path, monkeypatch) -> None:
    """The command checks every target before Prefect starts; the flow then takes what the check loaded
    instead of reading and validating the golden set and the captures again (once per target, not twice)."""
    from typer.testing import CliRunner

    from raglake.cli import app
    from raglake.pipeline import inputs

    loads: list[str] = []
    targets: list[str] = []
    real_load, real_target = inputs.load_golden, inputs.make_target
    monkeypatch.setattr(
        inputs, "load_golden", lambda path: loads.append(str(path)) or time.sleep(0.3) or real_load(path)
    )
    monkeypatch.setattr(
        inputs, "make_target", lambda spec, *a, **kw: targets.append(spec) or real_target(spec, *a, **kw)
    )
    lake, golden = str(tmp_path / "lake"), str(FIXTURES / "mini_golden.jsonl")
    replay = f"replay:{FIXTURES / 'mini_captures.jsonl'}"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--golden",
            golden,
            "--target",
            replay,
            "--target",
            f"{replay}",
            "--metrics",
            "mrr_at_k",
            "--lake",
            lake,
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert len(re.search(r"landed run\(s\): (.+?)\s+\(lake", " ".join(result.output.split())).group(1).split()) == 2
    assert loads == [golden, golden] and targets == [replay, replay]  # each run's inputs loaded once, not twice
    inputs_stage = duckdb.sql(
        f"SELECT run_id, value FROM read_parquet('{lake}/run_metrics/**/*.parquet') "
        "WHERE metric = 'stage_seconds' AND stage = 'inputs'"
    ).fetchall()
    assert len(inputs_stage) == 2 and all(v >= 0.3 for _, v in inputs_stage)  # the check's load, recorded by the flow


def test_gate_allow_missing_baseline_passes_a_first_run_only(tmp_path: Path, monkeypatch, capsys) -> None:
    """The README's CI recipe gates `latest` against its previous run: on a target's first run there is
    none. Without the flag that is bad input (exit 2); with it the gate passes and says why; once an
    earlier run exists the flag changes nothing (the comparison is made)."""
    lake = str(tmp_path / "lake")
    golden, replay = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
    land(lake, golden, replay, "r-first", minutes=0)
    args = ("gate", "--baseline", "latest", "--candidate", "latest", "--rules", str(ROOT / "data" / "gate.yaml"))
    code, out = _main(monkeypatch, capsys, *args, "--lake", lake)
    assert code == 2 and "r-first has no earlier run" in out and "--allow-missing-baseline" in out
    code, out = _main(monkeypatch, capsys, *args, "--allow-missing-baseline", "--lake", lake)
    assert code == 0 and "r-first is the first committed run of its target" in out and "pass" in out
    land(lake, golden, replay, "r-second", minutes=10)
    code, out = _main(monkeypatch, capsys, *args, "--allow-missing-baseline", "--lake", lake)
    assert code == 0 and "r-second against r-first" in out and "first committed run" not in out


def test_no_internal_jargon_in_help_texts() -> None:
    """Help texts speak to users: no "seed 001"-style references to the design documents (the metric
    registry's `seed` column and docs/METRICS.md cite them on purpose)."""
    from typer.main import get_command
    from typer.testing import CliRunner

    from raglake.cli import app

    jargon = re.compile(r"seed[\s_-]*0\d\d|seed0\d\d", re.IGNORECASE)
    commands = ["", *get_command(app).commands]  # "" is `raglake --help`
    assert "serve-demo" in commands and "import" in commands
    for name in commands:
        result = CliRunner().invoke(app, [name, "--help"] if name else ["--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (name, result.output)
        assert not jargon.search(result.output), (name, jargon.search(result.output).group(0))
