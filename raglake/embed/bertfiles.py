"""The files of a BERT sentence-transformers folder, read without torch: whether raglake's own forward pass
(raglake.embed.torchbert) can run it, its config, and its tokenizer.json as a transformers tokenizer is called
where raglake calls one. Importing this costs milliseconds (numpy and `tokenizers`), so the embedder decides
and counts tokens before, or without, importing torch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer

MODULES = ("Transformer", "Pooling", "Normalize")  # sentence-transformers module types, in order


def read_json(path: Path, missing: dict | list | None = None) -> dict | list:
    """A JSON file of the model folder (`missing`, default {}, when there is none); a broken one is a
    ValueError naming the file, line and column."""
    if not path.exists():
        return {} if missing is None else missing
    return _parse(path, path.read_text(encoding="utf-8"))


def _parse(path: Path, text: str) -> dict | list:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: {e}") from None


def unsupported(folder: Path) -> str | None:
    """Why `folder` cannot run here (None when it can): anything but a BERT encoder with absolute
    positions and GELU, mean pooling of the tokens alone, then L2 normalisation, no prompts, no
    model-level lower-casing, and its weights as safetensors beside a tokenizer.json."""
    modules = read_json(folder / "modules.json", [])
    kinds = tuple(str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules)
    if kinds != MODULES or modules[0].get("path", "") != "":
        return f"modules {kinds or '(none)'}, not {MODULES}"
    config = read_json(folder / "config.json")
    if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
        return f"model type {config.get('model_type')!r} with {config.get('hidden_act')!r}, not bert with gelu"
    if config.get("position_embedding_type", "absolute") != "absolute" or config.get("is_decoder"):
        return "not an encoder with absolute positions"
    pooling = read_json(folder / modules[1].get("path", "1_Pooling") / "config.json")
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"} or pooling.get("include_prompt", True) is not True:
        return f"pooling {sorted(modes)}, not the mean of the tokens"
    if read_json(folder / "config_sentence_transformers.json").get("prompts"):
        return "the model defines prompts"
    if read_json(folder / "sentence_bert_config.json").get("do_lower_case"):
        return "sentence-transformers lower-cases its input"
    for name in ("model.safetensors", "tokenizer.json", "sentence_bert_config.json"):
        if not (folder / name).exists():
            return f"no {name}"
    return None


class BertShape:
    """The figures of a model folder a caller needs before the model loads: layers, hidden size (the vectors'
    dimension) and the longest input in tokens."""

    def __init__(self, folder: Path):
        config = read_json(folder / "config.json")
        self.num_layers, self.hidden_size = int(config["num_hidden_layers"]), int(config["hidden_size"])
        self.heads, self.eps = int(config["num_attention_heads"]), float(config["layer_norm_eps"])
        length = int(read_json(folder / "sentence_bert_config.json").get("max_seq_length") or 512)
        self.max_seq_length = min(length, int(config["max_position_embeddings"]))


class BertTokenizer:
    """The model's tokenizer.json, called as a transformers tokenizer is where raglake calls one:
    `tokenizer(texts, add_special_tokens=..., truncation=False)["input_ids"]`."""

    def __init__(self, folder: Path, max_length: int):
        spec = (folder / "tokenizer.json").read_text(encoding="utf-8")
        _parse(folder / "tokenizer.json", spec)  # a broken file: a ValueError naming it, not tokenizers' bare Exception
        self._plain = Tokenizer.from_str(spec)
        self._plain.no_truncation()
        self._plain.no_padding()
        self._cut = Tokenizer.from_str(spec)
        self._cut.enable_truncation(max_length)  # longest first, as sentence-transformers asks
        self._cut.no_padding()
        self.model_max_length = max_length
        self.cls_token_id, self.sep_token_id = self._plain.token_to_id("[CLS]"), self._plain.token_to_id("[SEP]")
        self.pad_token_id = self._plain.token_to_id("[PAD]") or 0

    def __call__(
        self, texts: Sequence[str], add_special_tokens: bool = True, truncation: bool = False
    ) -> dict[str, list[list[int]]]:
        if truncation:
            raise ValueError("BertTokenizer truncates only inside encode()")
        encoded = self._plain.encode_batch(list(texts), add_special_tokens=add_special_tokens)
        return {"input_ids": [e.ids for e in encoded]}
