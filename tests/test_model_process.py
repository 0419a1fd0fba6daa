"""The packaged model in a process of its own (raglake.embed.process, issue 29's cold start): its vectors equal
this process's own TorchBert bit for bit, so nothing cached or landed depends on where the model ran; a call
that embeds leaves torch unimported in the caller and lands the very scores of a run in process; a process
no run takes is stopped; the other process ends with this one; errors name their cause."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from raglake.embed import process
from raglake.embed.encoders import Encoders
from raglake.embed.model import Embedder, cpu_only_torch, resolve_embedder_path
from raglake.embed.torchbert import TorchBert
from raglake.errors import ConfigError
from tests.test_torchbert import _copy, _sample_texts

ROOT = Path(__file__).resolve().parents[1]
FOLDER = resolve_embedder_path(None)[1]


@pytest.fixture(scope="module")
def remote():
    model = process.RemoteBert(FOLDER)
    yield model
    model.process.close()


@contextmanager
def threads_of(remote):
    """torch in this process on the model process's thread count: the last bits of a sum depend on it (as they
    do between a Dask worker, on one thread, and this process), and a Dask cluster started earlier in a test
    process leaves OMP_NUM_THREADS=1 in its environment (distributed's Nanny), which later children inherit."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(remote.process.ready()["threads"])
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_the_process_takes_the_thread_count_torch_takes_here() -> None:
    """What a fresh import of torch in this environment chooses: the vectors are those of the model in the caller."""
    model = process.ModelProcess(FOLDER)
    try:
        code = "import torch; print(torch.get_num_threads())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
        assert model.ready()["threads"] == int(done.stdout)
    finally:
        model.close()


@pytest.mark.parametrize(("batch_size", "normalize"), [(64, True), (5, True), (64, False)])
def test_the_process_vectors_equal_this_process_bit_for_bit(remote, batch_size: int, normalize: bool) -> None:
    texts = _sample_texts()
    theirs = remote.encode(texts, batch_size=batch_size, normalize_embeddings=normalize)
    with threads_of(remote):
        ours = TorchBert(FOLDER).encode(texts, batch_size=batch_size, normalize_embeddings=normalize)
    assert theirs.dtype == ours.dtype == np.float32 and theirs.shape == ours.shape == (len(texts), 384)
    assert np.array_equal(theirs, ours)
    assert remote.tokenizer(texts)["input_ids"] == TorchBert(FOLDER).tokenizer(texts)["input_ids"]
    assert (remote.max_seq_length, remote.get_embedding_dimension()) == (256, 384)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "one-length"])
def test_bertscores_hidden_layers_from_the_process_equal_this_process_bit_for_bit(remote, padded: bool) -> None:
    import torch

    local = TorchBert(FOLDER)
    ids = local.tokenizer(_sample_texts()[:40], add_special_tokens=True)["input_ids"]
    ids = [seq[:60] for seq in ids] if padded else [seq[:6] for seq in ids if len(seq) >= 6]
    width = max(map(len, ids))
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros_like(input_ids)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)], mask[row, : len(seq)] = seq, 1
    assert bool(mask.all()) is not padded
    with threads_of(remote):
        states = local.hidden_states(torch.from_numpy(input_ids), torch.from_numpy(mask))
    for layer in range(local.num_layers + 1):
        theirs = remote.process.layer_states(input_ids, mask, layer)
        assert theirs.dtype == np.float32 and np.array_equal(theirs, states[layer].numpy()), layer


def test_two_threads_asking_at_once_each_get_their_own_vectors(remote) -> None:
    texts = _sample_texts()
    halves = [texts[::2], texts[1::2]]
    alone = [remote.encode(h, batch_size=64, normalize_embeddings=True) for h in halves]
    got: dict[int, np.ndarray] = {}
    threads = [
        threading.Thread(target=lambda i=i: got.__setitem__(i, remote.encode(halves[i], 64, True))) for i in (0, 1)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(got[i], alone[i]) for i in (0, 1))


CALL = """
import json, sys
import raglake
rows, lake, metrics = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
result = raglake.evaluate(rows, metrics=metrics, lake=lake)
frame = result.to_pandas()
values = sorted((r.case_id, r.metric, float(r.value)) for r in frame.itertuples() if r.value == r.value)
print(json.dumps({"torch": "torch" in sys.modules, "values": values}))
"""
ROWS = [
    {"id": f"q{i}", "question": f"What is item {i}?", "answer": f"Item {i} is a {w}.", "reference": f"It is a {w}.",
     "contexts": [f"Item {i} is a {w} of the catalogue.", "Unrelated text."]}
    for i, w in enumerate(["lamp", "chair", "table", "small red boat"])
]  # fmt: skip


def _python(tmp_path: Path, code: str, *args: str, switch: str | None = None) -> str:
    """What a fresh `python -c CODE ARGS` prints (it must succeed), without the test harness's Prefect API
    and with RAGLAKE_MODEL_PROCESS=`switch` (None: unset, the default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", process.SWITCH)}
    env.update({process.SWITCH: switch} if switch is not None else {})
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def _evaluate(tmp_path: Path, name: str, switch: str, metrics: str) -> dict:
    return json.loads(_python(tmp_path, CALL, json.dumps(ROWS), str(tmp_path / name), metrics, switch=switch))


def test_an_evaluation_that_embeds_leaves_torch_out_of_the_caller_and_lands_the_same_scores(tmp_path: Path) -> None:
    metrics = "semantic_similarity,answer_correctness_emb,bert_score_f1"
    apart, here = _evaluate(tmp_path, "apart", "1", metrics), _evaluate(tmp_path, "here", "0", metrics)
    assert apart["torch"] is False and here["torch"] is True
    assert {m for _, m, _ in apart["values"]} == set(metrics.split(","))
    assert len(apart["values"]) == 3 * len(ROWS) and apart["values"] == here["values"]


LEFT = """
import json, os, sys
import raglake
from raglake.embed import process
started = []
real = process.ModelProcess.__init__
def spy(self, folder):
    real(self, folder)
    started.append(self._process)
process.ModelProcess.__init__ = spy
for lake in sys.argv[2:]:  # the second call does not guess again
    raglake.evaluate(json.loads(sys.argv[1]), metrics="mrr_at_k", lake=lake)
running = [p.poll() is None for p in started]
print(json.dumps({"started": len(started), "running": running, "early": len(process._early)}))
"""


def test_a_call_that_does_not_embed_stops_the_process_it_started_early(tmp_path: Path) -> None:
    out = _python(tmp_path, LEFT, json.dumps(ROWS), str(tmp_path / "lake"), str(tmp_path / "lake2"))
    assert json.loads(out) == {"started": 1, "running": [False], "early": 0}


def test_the_process_ends_when_its_caller_is_killed(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import os, signal, sys
        from raglake.embed import process
        p = process.ModelProcess(process.Path({str(FOLDER)!r}))
        p.ready()
        print(p._process.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    child = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


def test_forgetting_the_models_ends_the_process() -> None:
    encoders = Encoders()
    embedder = encoders.embedder()
    before = process.wanted
    try:
        process.wanted = lambda: True  # this test process may have imported torch already
        vectors = embedder.encode(["a question"])
    finally:
        process.wanted = before
    assert vectors.shape == (1, 384)
    child = embedder.model.process._process
    assert child.poll() is None
    encoders.clear()
    assert child.poll() == 0


def test_a_broken_model_is_a_config_error_naming_the_file_as_in_this_process(tmp_path: Path) -> None:
    broken = _copy(FOLDER, tmp_path / "model")
    (broken / "model.safetensors").unlink()
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="model.safetensors") as here:
        TorchBert(broken)
    model = process.RemoteBert(broken)
    for _ in range(2):  # the second call gets the same error, not a broken pipe to a process that has ended
        with pytest.raises(ConfigError) as apart:
            model.encode(["a question"])
        assert str(apart.value) == f"cannot load embedder from {broken}: {here.value}"


def test_an_interrupted_request_leaves_the_next_call_a_fresh_process(monkeypatch) -> None:
    model = process.RemoteBert(FOLDER)
    first = model.encode(["a question"], 64, True)
    real = process.receive

    def interrupted(sock):
        raise KeyboardInterrupt

    monkeypatch.setattr(process, "receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.encode(["another question"], 64, True)  # sent, its answer never read: the stream is out of step
    monkeypatch.setattr(process, "receive", real)
    old = model.process
    assert old.broken
    again = model.encode(["a question"], 64, True)
    assert model.process is not old and old._process.poll() is not None
    assert np.array_equal(again, first)
    model.process.close()


def test_a_wrong_switch_is_an_error_naming_it(monkeypatch) -> None:
    monkeypatch.setitem(os.environ, process.SWITCH, "yes")
    with pytest.raises(ConfigError, match="RAGLAKE_MODEL_PROCESS='yes': use 1 .* or 0"):
        process.wanted()
    monkeypatch.setitem(os.environ, process.SWITCH, "0")
    assert process.wanted() is False


@pytest.mark.parametrize(
    ("cuda", "hip", "cpu_only"),
    [("None", "None", True), ("'12.1'", "None", False), ("None", "'6.0'", False)],
)
def test_auto_is_the_cpu_without_importing_torch_only_for_a_cpu_build(monkeypatch, tmp_path, cuda, hip, cpu_only):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('never imported')\n")
    (fake / "version.py").write_text(f"from typing import Optional\ncuda: Optional[str] = {cuda}\nhip = {hip}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cpu_only_torch() is cpu_only


def test_auto_resolves_to_the_cpu_in_a_fresh_process_as_torch_itself_says() -> None:
    code = (
        "import sys; from raglake.embed.model import resolve_device; d = resolve_device('auto'); "
        "before = 'torch' in sys.modules; import torch; print(d, before, torch.cuda.is_available())"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cpu", "False", "False"]


def test_the_embedder_of_a_process_with_torch_loaded_stays_here() -> None:
    import torch  # noqa: F401 - loaded: the model then loads here in ~0.1 s

    assert "torch" in sys.modules and process.wanted() is False
    assert not hasattr(Embedder().model, "remote")


def test_a_later_call_uses_the_loaded_model_and_starts_no_other_process(tmp_path: Path) -> None:
    code = textwrap.dedent("""
        import json, sys
        import raglake
        from raglake.embed import process
        started = []
        real = process.ModelProcess.__init__
        def spy(self, folder):
            real(self, folder)
            started.append(self)
        process.ModelProcess.__init__ = spy
        for lake in sys.argv[2:]:
            raglake.evaluate(json.loads(sys.argv[1]), metrics="semantic_similarity", lake=lake)
        print(len(started))
    """)
    assert _python(tmp_path, code, json.dumps(ROWS), *(str(tmp_path / f"lake{i}") for i in range(3))) == "1"


def test_a_fork_gets_a_process_of_its_own_and_leaves_its_parents_alone(remote) -> None:
    first = remote.encode(["a question"], 64, True)
    parents = remote.process
    pid = os.fork()
    if pid == 0:  # the fork: its own process, the same vectors; the parent's process untouched
        code = 1
        try:
            same = np.array_equal(remote.encode(["a question"], 64, True), first)
            code = 0 if same and remote.process is not parents and remote.process.owner == os.getpid() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert remote.process is parents and np.array_equal(remote.encode(["a question"], 64, True), first)


@pytest.mark.parametrize("loaded", [True, False], ids=["loaded", "still-loading"])
def test_a_caller_that_exits_has_ended_its_process_first(tmp_path: Path, loaded: bool) -> None:
    """Reaped at exit (raglake.embed.process._close_all), loaded or not: nothing outlives the caller, so a
    command's process group is empty once it has exited (tests/test_signals.py counts on it)."""
    code = textwrap.dedent(f"""
        from raglake.embed import process
        p = process.ModelProcess(process.Path({str(FOLDER)!r}))
        if {loaded}:
            p.ready()
        print(p._process.pid, flush=True)
    """)
    assert not Path(f"/proc/{int(_python(tmp_path, code))}").exists()


COMMAND = """
import atexit, json, sys
from raglake.embed import process
started = []
real = process.ModelProcess.__init__
def spy(self, folder):
    real(self, folder)
    started.append((self, "raglake.cli" in sys.modules))
process.ModelProcess.__init__ = spy
def report():
    print(json.dumps({"started": len(started), "cli_imported": [early for _, early in started],
                      "running": [p._process.poll() is None for p, _ in started]}), flush=True)
atexit.register(report)  # raglake.command's console ends with os._exit, after the atexit handlers
sys.argv = ["raglake", "run", *json.loads(sys.argv[1])]
from raglake.command import console
console()
"""


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        # started before the command line was imported, taken by the run (no second one), ended with the command
        ("embeds", {"started": 1, "cli_imported": [False], "running": [False]}),
        ("eval file of retrieval metrics", {"started": 1, "cli_imported": [False], "running": [False]}),  # stopped
        ("--metrics", {"started": 1, "cli_imported": [False], "running": [False]}),
        ("--device cuda", {"started": 0, "cli_imported": [], "running": []}),
    ],
)
def test_raglake_run_starts_the_models_process_before_the_command_lines_imports(
    tmp_path: Path, how: str, expected: dict
) -> None:
    """`raglake run` on the packaged model and the cpu starts the model's process before importing the command
    line (raglake.command), once: the run takes that process rather than a second. A run whose eval file asks for
    no embedding gets it stopped once its settings are resolved; one naming another device starts none."""
    from tests.conftest import FIXTURES

    golden, captures = FIXTURES / "mini_golden.jsonl", FIXTURES / "mini_captures.jsonl"
    args = ["--golden", str(golden), "--target", f"replay:{captures}", "--lake", str(tmp_path / "lake"), "-q"]
    if how == "embeds":
        args += ["-c", str(_eval_file(tmp_path, "semantic_similarity"))]
    elif how == "eval file of retrieval metrics":
        args += ["-c", str(_eval_file(tmp_path, "mrr_at_k"))]
    elif how == "--metrics":
        args += ["--metrics", "semantic_similarity"]
    else:
        args += ["--device", "cuda", "--metrics", "mrr_at_k"]  # refused or not, no process is guessed
    out = _command(tmp_path, COMMAND, json.dumps(args), ok=how != "--device cuda")
    assert json.loads(out) == expected


def _eval_file(tmp_path: Path, metric: str) -> Path:
    path = tmp_path / f"{metric}.yaml"
    path.write_text(f"metrics: [{metric}]\n")
    return path


def _command(tmp_path: Path, code: str, *args: str, ok: bool = True) -> str:
    """What `python -c CODE ARGS` prints last (it must succeed when `ok`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", process.SWITCH)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 or not ok, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_guess_reads_raglake_runs_options_only() -> None:
    from raglake.command import run_options

    assert run_options(["runs"]) is None and run_options([]) is None and run_options(["run", "--help"]) is None
    assert run_options(["run", "-q", "--device=cpu", "--embedder", "x", "-m", "a,b"]) == {
        "-q": "", "--device": "cpu", "--embedder": "x", "-m": "a,b"
    }  # fmt: skip


AT_THE_RUN = """
import json, sys
from raglake import command
from raglake.cli import interrupt, main
from raglake.embed import process
seen = []
real = interrupt.run_in_worker
def spy(fn, *args):
    seen.append([p._process.poll() is None for p in process._early.values()])
    return real(fn, *args)
interrupt.run_in_worker = spy
sys.argv = ["raglake", "run", *json.loads(sys.argv[1])]
command.start_model_early(sys.argv[1:])
try:
    main()
except SystemExit:
    pass
print(json.dumps(seen))
"""


def test_a_guessed_process_no_run_takes_is_stopped_before_the_run_starts(tmp_path: Path) -> None:
    """Not only at the command's end: a run that does not embed must not share the cpu with a model loading (it is
    stopped once the settings are resolved, before the inputs are read)."""
    from tests.conftest import FIXTURES

    golden, captures = FIXTURES / "mini_golden.jsonl", FIXTURES / "mini_captures.jsonl"
    args = ["--golden", str(golden), "--target", f"replay:{captures}", "--lake", str(tmp_path / "lake"), "-q"]
    args += ["-c", str(_eval_file(tmp_path, "mrr_at_k"))]
    assert json.loads(_command(tmp_path, AT_THE_RUN, json.dumps(args))) == [[]]
