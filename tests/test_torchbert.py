"""The packaged default on the cpu runs through raglake.embed.torchbert (torch and `tokenizers` alone):
its vectors, token ids and hidden states equal sentence-transformers' (and transformers' BertModel's)
bit for bit, so a cached vector, a score or a BERTScore does not depend on which of the two made it;
loading it imports neither sentence-transformers nor transformers. Any other folder or device loads
sentence-transformers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from raglake.embed import model as model_module
from raglake.embed.bertscore import BertScorer
from raglake.embed.model import Embedder, _is_torchbert
from raglake.embed.torchbert import TorchBert, unsupported
from raglake.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
EDGES = ["", " ", "  leading and trailing  ", "\t\n", "x", "Ünïcödé café naïve 東京 😀 – “quotes”", "word " * 400]


def _sample_texts() -> list[str]:
    """Every question, reference, answer and retrieved chunk of the bundled sample (a few hundred texts,
    a few over the model's 256 tokens), then edge cases."""
    texts: list[str] = []
    for line in (ROOT / "data" / "golden" / "sample.jsonl").read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        texts += [case.get("question") or "", case.get("reference_answer") or ""]
    for line in (ROOT / "data" / "captures" / "basic_search.jsonl").read_text(encoding="utf-8").splitlines():
        capture = json.loads(line)
        texts += [capture.get("answer") or "", *(chunk.get("text") or "" for chunk in capture.get("retrieved", []))]
    return [*dict.fromkeys(texts), *EDGES]


@pytest.fixture(scope="module")
def pair() -> tuple[Embedder, object]:
    """The default embedder (a TorchBert) and sentence-transformers' model of the same folder."""
    embedder = Embedder()
    assert _is_torchbert(embedder.model)
    return embedder, embedder.sentence_transformer


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _sample_texts()


@pytest.mark.parametrize("batch_size", [64, 5])
def test_vectors_equal_sentence_transformers_bit_for_bit(pair, texts, batch_size: int) -> None:
    embedder, st = pair
    assert len(texts) > 200 and max(embedder.count_tokens(texts)) > embedder.max_sequence  # truncation happens
    ours = embedder.model.encode(texts, batch_size=batch_size, normalize_embeddings=True)
    theirs = st.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    assert ours.dtype == theirs.dtype == np.float32 and ours.shape == theirs.shape
    assert np.array_equal(ours, theirs), f"max |difference| {np.abs(ours - theirs).max():.1e}"


def test_token_ids_and_the_model_figures_equal_the_transformers_tokenizers(pair, texts) -> None:
    embedder, st = pair
    for special in (True, False):
        ours = embedder.model.tokenizer(texts, add_special_tokens=special, truncation=False)["input_ids"]
        assert ours == st.tokenizer(texts, add_special_tokens=special, truncation=False)["input_ids"]
    for name in ("cls_token_id", "sep_token_id", "pad_token_id", "model_max_length"):
        assert getattr(embedder.model.tokenizer, name) == getattr(st.tokenizer, name), name
    assert (embedder.max_sequence, embedder.dimension) == (st.max_seq_length, st.get_embedding_dimension())
    config = st[0].auto_model.config
    assert embedder.transformer_shape == (config.num_hidden_layers, config.hidden_size)


@pytest.mark.parametrize("padded", [True, False], ids=["padded", "one-length"])
def test_hidden_states_equal_bertmodels(pair, texts, padded: bool) -> None:
    """BERTScore's input: every layer's hidden states, with a padding mask and without one (transformers
    passes sdpa no mask when nothing is padded)."""
    embedder, st = pair
    ids = embedder.model.tokenizer(texts[:40], add_special_tokens=True)["input_ids"]
    ids = [seq[:60] for seq in ids] if padded else [seq[:6] for seq in ids if len(seq) >= 6]
    width = max(len(seq) for seq in ids)
    input_ids, mask = torch.zeros((len(ids), width), dtype=torch.long), torch.zeros((len(ids), width), dtype=torch.long)
    for row, seq in enumerate(ids):
        input_ids[row, : len(seq)], mask[row, : len(seq)] = torch.tensor(seq), 1
    assert bool(mask.all()) is not padded
    ours = embedder.hidden_states(input_ids, mask)
    with torch.no_grad():
        theirs = st[0].auto_model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True).hidden_states
    assert len(ours) == len(theirs) == embedder.transformer_shape[0] + 1
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_bertscore_is_the_same_through_either_model(pair, texts) -> None:
    embedder, st = pair
    through_st = Embedder()
    through_st._model = st  # sentence-transformers' model behind the same embedder
    candidates, references = texts[:30], texts[30:60]
    for layer in (None, 3):
        ours = BertScorer(embedder, layer).score(candidates, references)
        theirs = BertScorer(through_st, layer).score(candidates, references)
        assert ours == theirs and sum(s is not None for s in ours) > 20


@pytest.mark.parametrize(("switch", "model"), [("0", "TorchBert"), ("1", "RemoteBert")])
def test_the_default_loads_without_sentence_transformers_or_transformers(switch: str, model: str) -> None:
    """In this process (RAGLAKE_MODEL_PROCESS=0) or in its own (raglake.embed.process, the default where torch
    is not imported yet: that process runs raglake.embed.serve, which imports torchbert alone)."""
    code = (
        "import sys; from raglake.embed.encoders import get_embedder; e = get_embedder(); "
        "e.load(warm=True); e.encode(['a question']); e.count_tokens(['a question']); "
        "print(type(e.model).__name__, sorted({m.split('.')[0] for m in sys.modules} & "
        "{'sentence_transformers', 'transformers', 'sklearn', 'scipy'}))"
    )
    env = {**os.environ, "RAGLAKE_MODEL_PROCESS": switch}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [model, "[]"]


def _copy(folder: Path, to: Path) -> Path:
    """The model folder as links (the weights are not copied), its JSON files as copies to edit."""
    for path in folder.rglob("*"):
        target = to / path.relative_to(folder)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix == ".json":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return to


def _edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    path.write_text(json.dumps({**data, **changes}), encoding="utf-8")


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda f: _edit(f / "1_Pooling" / "config.json", pooling_mode_cls_token=True), "pooling"),
        (lambda f: _edit(f / "config.json", model_type="roberta"), "model type"),
        (lambda f: _edit(f / "config.json", hidden_act="relu"), "gelu"),
        (lambda f: _edit(f / "config_sentence_transformers.json", prompts={"query": "query: "}), "prompts"),
        (lambda f: _edit(f / "sentence_bert_config.json", do_lower_case=True), "lower-cases"),
        (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json"),
        (
            lambda f: (f / "modules.json").write_text(
                json.dumps(json.loads((f / "modules.json").read_text())[:2]), encoding="utf-8"
            ),
            "modules",
        ),
    ],
    ids=["cls-pooling", "roberta", "relu", "prompts", "lower-case", "no-tokenizer-json", "no-normalize"],
)
def test_a_model_of_another_form_is_left_to_sentence_transformers(pair, tmp_path, change, reason: str) -> None:
    embedder, _ = pair
    folder = _copy(embedder.path, tmp_path / "model")
    assert unsupported(folder) is None
    change(folder)
    why = unsupported(folder)
    assert why is not None and reason in why
    with pytest.raises(ValueError, match=reason):
        TorchBert(folder)


def test_another_folder_or_device_loads_sentence_transformers(pair) -> None:
    embedder, _ = pair
    named = Embedder(str(embedder.path))  # the same weights, named by folder: not the verified default
    assert not _is_torchbert(named.model) and type(named.model).__name__ == "SentenceTransformer"
    assert np.array_equal(named.encode(["a question", "an answer"]), embedder.encode(["a question", "an answer"]))


@pytest.mark.parametrize(
    "broken, says",
    [("model.safetensors", "header"), ("tokenizer.json", "line 1 column"), ("config.json", "line 1 column")],
)
def test_a_damaged_packaged_model_is_a_config_error_naming_the_file(pair, tmp_path, monkeypatch, broken, says) -> None:
    embedder, _ = pair
    folder = _copy(embedder.path, tmp_path / "model")
    (folder / broken).unlink()
    (folder / broken).write_text('{"truncated": ', encoding="utf-8")
    monkeypatch.setattr(model_module, "resolve_embedder_path", lambda name: (embedder.name, folder))
    damaged = Embedder()
    with pytest.raises(ConfigError, match="cannot load embedder") as raised:
        damaged.load()
    assert str(folder / broken) in str(raised.value) and says in str(raised.value)
