"""`--device auto|cpu|cuda|mps` (issue 12, item 5): a bad name or a device torch does not see is refused
with the option's name and a suggestion; `auto` falls back to the cpu; the device reaches
sentence-transformers and BERTScore, is recorded in the run, and keeps its own vector cache folder
(the embedder's key, on every score row, stays the same). The encoder sorts texts by length before
it batches and returns them in the caller's order, with the raw model's values. All on the cpu: the
CUDA path is checked by telling the code that torch sees a GPU, never by running on one."""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

from raglake import progress
from raglake.embed import cache as cache_module
from raglake.embed.cache import EmbeddingCache, TextEncoder, cache_folder_name
from raglake.embed.encoders import Encoders, get_embedder
from raglake.embed.model import Embedder, offline_environment, resolve_device
from raglake.errors import ConfigError
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.embedding import EmbeddingSpec
from raglake.pipeline.plan import embedding_spec, plan_run
from raglake.pipeline.rescore_settings import RescoreSettings
from raglake.pipeline.settings import RunSettings, build
from tests.conftest import FIXTURES, ROOT


def _torch_sees(monkeypatch, cuda: bool, mps: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


@pytest.mark.parametrize("model", [RunSettings, RescoreSettings])
@pytest.mark.parametrize(
    ("name", "meant"), [("cdua", "cuda"), ("gpu", "cuda"), ("CUDA", "cuda"), ("cuda:0", "cuda"), ("cpus", "cpu")]
)
def test_an_unknown_device_is_refused_with_a_suggestion(model, name: str, meant: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(model, device=name)
    assert str(err.value).startswith(f"device (--device): unknown device {name!r} (did you mean {meant!r}?)")
    assert "known: auto, cpu, cuda, mps" in str(err.value)


@pytest.mark.parametrize("device", ["cuda", "mps"])
def test_a_device_torch_does_not_see_is_refused(monkeypatch, device: str) -> None:
    _torch_sees(monkeypatch, cuda=False, mps=False)
    with pytest.raises(ConfigError) as err:
        build(RunSettings, device=device)
    message = str(err.value)
    expected = f"device (--device): device {device!r} asked for, but torch sees no {device.upper()} device"
    assert message.startswith(expected)
    assert "--device auto" in message and "--device cpu" in message
    _torch_sees(monkeypatch, cuda=device == "cuda", mps=device == "mps")
    assert build(RunSettings, device=device).device == device


@pytest.mark.parametrize(
    ("cuda", "mps", "expected"),
    [(True, True, "cuda"), (True, False, "cuda"), (False, True, "mps"), (False, False, "cpu")],
)
def test_auto_prefers_cuda_then_mps_then_the_cpu(monkeypatch, cuda: bool, mps: bool, expected: str) -> None:
    _torch_sees(monkeypatch, cuda, mps)
    assert resolve_device("auto") == expected
    settings = build(RunSettings)
    assert settings.device == "auto"  # kept as asked: resolved where the run embeds
    assert RunSettings.model_validate_json(settings.model_dump_json()) == settings


def test_the_cpu_never_imports_torch() -> None:
    code = (
        "import sys; from raglake.embed.model import resolve_device; from raglake.pipeline.settings import build, "
        "RunSettings; assert resolve_device('cpu') == 'cpu'; build(RunSettings, device='cpu'); "
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


class FakeSentenceTransformer:
    """Stands in for sentence_transformers.SentenceTransformer: records the device it is given."""

    def __init__(self, path: str, device: str):
        self.path, self.device = path, device


def test_the_resolved_device_reaches_the_model_and_names_the_cache_folder(monkeypatch, tmp_path) -> None:
    import sentence_transformers

    _torch_sees(monkeypatch, cuda=True, mps=False)
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", FakeSentenceTransformer)
    encoders = Encoders()
    gpu = encoders.text_encoder(None, tmp_path, "auto")
    assert gpu.embedder.device == "cuda" and gpu.embedder.model.device == "cuda"
    assert encoders.embedder(None, "cuda") is gpu.embedder  # `auto` and what it resolves to: one model
    cpu = encoders.text_encoder(None, tmp_path, "cpu")
    assert cpu.embedder is not gpu.embedder and str(cpu.embedder.model.device) == "cpu"  # raglake's TorchBert
    # one key for both (the same model made the vectors), one cache folder each
    assert cpu.embedder.key == gpu.embedder.key
    assert cpu.cache.folder.name == cache_folder_name(cpu.embedder.key)
    assert gpu.cache.folder.name == cache_folder_name(gpu.embedder.key) + "@cuda"


def test_the_spec_carries_the_resolved_device_and_a_cpu_run_keeps_its_cache_token(monkeypatch, tmp_path) -> None:
    _torch_sees(monkeypatch, cuda=False, mps=False)
    metrics = [get_metric("semantic_similarity")]
    spec = embedding_spec(metrics, None, str(tmp_path / "lake"), ScoringConfig(), [], device="auto")
    assert spec.device == "cpu"  # the fallback
    assert spec.encoder().embedder.device == "cpu"
    assert spec.cache_token() == f"{spec.key}|idf:-"  # as before devices existed: cached scores stay valid
    on_gpu = EmbeddingSpec(spec.embedder, spec.cache_root, spec.key, None, "cuda")
    assert on_gpu.cache_token() != spec.cache_token() and on_gpu.key == spec.key
    assert embedding_spec([get_metric("mrr_at_k")], None, str(tmp_path / "lake"), ScoringConfig(), []) is None


@pytest.mark.parametrize(("metrics", "recorded"), [(["semantic_similarity"], "cpu"), (["mrr_at_k"], None)])
def test_the_run_records_its_device(monkeypatch, tmp_path, metrics: list[str], recorded: str | None) -> None:
    _torch_sees(monkeypatch, cuda=False, mps=False)
    settings = RunSettings(
        golden=str(FIXTURES / "mini_golden.jsonl"),
        target=f"replay:{FIXTURES / 'mini_captures.jsonl'}",
        lake=str(tmp_path / "lake"),
        metrics=metrics,
    )
    record = plan_run(settings).record(dt.datetime.now(dt.timezone.utc), 0)
    assert record.config["device"] == recorded


def test_the_cli_refuses_an_unknown_device_before_any_work(tmp_path) -> None:
    env = {**os.environ, "RAGLAKE_LAKE": str(tmp_path / "lake"), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "raglake", "run", "--device", "gpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "device (--device): unknown device 'gpu' (did you mean 'cuda'?)" in done.stdout
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").rglob("*.parquet"))


# ---- length-sorted encoding ---------------------------------------------------------------------


class LengthStub:
    """A vector per text that depends on the text only; records each call."""

    key, dimension = "len@0", 2

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts) -> np.ndarray:
        self.calls.append(list(texts))
        return np.asarray([[len(t), sum(map(ord, t))] for t in texts], dtype=np.float32).reshape(-1, 2)


def _texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    words = "atlas postgres launch billing owner server rack meeting notes march may dana lyon".split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) + f" #{i}" for i in range(n)]


@pytest.mark.parametrize("bar", [False, True], ids=["one-call", "progress-slices"])
def test_texts_are_encoded_longest_first_and_returned_in_order(monkeypatch, bar: bool) -> None:
    monkeypatch.setattr(progress, "active", lambda: bar)
    monkeypatch.setattr(cache_module, "_PROGRESS_SLICE", 7)
    stub, texts = LengthStub(), _texts(30)
    vectors = TextEncoder(stub, EmbeddingCache(None, stub.key)).encode(texts)
    assert len(stub.calls) == (5 if bar else 1)  # slices of 7: each of like lengths
    sent = [t for call in stub.calls for t in call]
    assert sorted(sent) == sorted(texts)
    assert [len(t) for t in sent] == sorted((len(t) for t in texts), reverse=True)
    assert np.array_equal(vectors, LengthStub().encode(texts))  # the caller's order


def test_length_sorting_keeps_the_raw_models_values(monkeypatch) -> None:
    """With the real packaged model, in progress slices (sorted before slicing): within 1e-6 of one
    raw `SentenceTransformer.encode` of the same texts."""
    monkeypatch.setattr(progress, "active", lambda: True)
    monkeypatch.setattr(cache_module, "_PROGRESS_SLICE", 16)
    embedder = get_embedder()
    texts = _texts(48, seed=11)
    ours = TextEncoder(embedder, EmbeddingCache(None, embedder.key)).encode(texts)
    raw = embedder.sentence_transformer.encode(texts, batch_size=embedder.batch_size, normalize_embeddings=True)
    assert ours.shape == raw.shape
    assert float(np.abs(ours - raw).max()) < 1e-6


def test_an_embedder_on_the_cpu_by_default() -> None:
    assert Embedder().device == "cpu"
    assert get_embedder().device == "cpu"  # the builtin target and library calls stay on the cpu


@pytest.mark.parametrize(("device", "expected"), [("cpu", "false"), ("cuda", "true"), ("mps", "true")])
def test_tokenisation_runs_in_parallel_for_an_accelerator_and_serially_on_the_cpu(monkeypatch, device, expected):
    """On a GPU the tokenizer is what limits encoding (NOTES.md: H200 figures), on the cpu torch takes the cores."""
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    offline_environment(device)
    assert os.environ["TOKENIZERS_PARALLELISM"] == expected
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_a_tokenizer_setting_the_user_made_wins(monkeypatch) -> None:
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    offline_environment("cuda")
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
