"""The loaded models of a process: embedders, text encoders (embedder + vector cache) and BERTScore
scorers, each built once per device and shared by the builtin target and the metrics.
A device is any --device value (raglake.embed.model.DEVICES), resolved first (`auto`: cuda, else mps, when
torch sees one, else cpu); cpu by default, so the builtin target and library calls stay on the cpu.

`Encoders` owns them. The process uses one default instance, `ENCODERS`, through the module functions
below; `ENCODERS.clear()` drops every model it holds (the CLI calls it when a command ends; tests may
call it to start from nothing)."""

from __future__ import annotations

import threading
from pathlib import Path

from raglake.embed.bertscore import BertScorer
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.model import DEFAULT_EMBEDDER, Embedder, resolve_device, resolve_embedder_path
from raglake.errors import ConfigError


class Encoders:
    """Embedders by (weights folder, device), encoders by (weights, device, cache folder), scorers by
    (weights, device, layer)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._embedders: dict[tuple[str, str], Embedder] = {}
        self._encoders: dict[tuple[str, str, str], TextEncoder] = {}
        self._scorers: dict[tuple[str, str, int | None], BertScorer] = {}

    def embedder(self, name_or_path: str | None = None, device: str = "cpu") -> Embedder:
        """The embedder for a name or folder on a device (loaded once)."""
        _, path = resolve_embedder_path(name_or_path)
        device = resolve_device(device)
        with self._lock:
            if (str(path), device) not in self._embedders:
                named = name_or_path not in (None, DEFAULT_EMBEDDER)
                self._embedders[str(path), device] = Embedder(str(path) if named else None, device=device)
            return self._embedders[str(path), device]

    def text_encoder(self, embedder: str | None, cache_root: str | Path | None, device: str = "cpu") -> TextEncoder:
        """The encoder for (embedder, device, vector cache folder; None: no disk cache)."""
        model = self.embedder(embedder, device)
        key = (str(model.path), model.device, str(cache_root))
        with self._lock:
            if key not in self._encoders:
                self._encoders[key] = TextEncoder(model, EmbeddingCache(cache_root, model.key, model.device))
            return self._encoders[key]

    def bert_scorer(self, embedder: Embedder, layer: int | None) -> BertScorer:
        """The BERTScore scorer for an embedder (on its device) and a hidden layer (None: the model's last)."""
        key = (str(embedder.path), embedder.device, layer)
        with self._lock:
            if key not in self._scorers:
                try:
                    self._scorers[key] = BertScorer(embedder, layer)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
            return self._scorers[key]

    def clear(self) -> None:
        """Forget every model (the next request loads afresh)."""
        with self._lock:
            embedders = list(self._embedders.values())
            self._embedders.clear()
            self._encoders.clear()
            self._scorers.clear()
        for embedder in embedders:
            embedder.release()


ENCODERS = Encoders()


def get_embedder(name_or_path: str | None = None, device: str = "cpu") -> Embedder:
    """The process's embedder for a name (loaded once, shared by the target and the metrics)."""
    return ENCODERS.embedder(name_or_path, device)


def text_encoder(embedder: str | None, cache_root: str | Path | None, device: str = "cpu") -> TextEncoder:
    """The process's encoder for (embedder, cache folder, device): the builtin target and the metrics share it."""
    return ENCODERS.text_encoder(embedder, cache_root, device)


def default_encoder() -> TextEncoder:
    """The default embedder, without a disk cache."""
    return ENCODERS.text_encoder(None, None)


def bert_scorer(embedder: Embedder, layer: int | None) -> BertScorer:
    return ENCODERS.bert_scorer(embedder, layer)
