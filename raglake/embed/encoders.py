"""The loaded models of a process: embedders, text encoders (embedder + vector cache) and BERTScore
scorers, each built once and shared by the builtin target and the metrics.

`Encoders` owns them. The process uses one default instance, `ENCODERS`, through the module functions
below; `ENCODERS.clear()` drops every model it holds (the CLI calls it when a command ends; tests may
call it to start from nothing)."""

from __future__ import annotations

import threading
from pathlib import Path

from raglake.embed.bertscore import BertScorer
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.model import DEFAULT_EMBEDDER, Embedder, resolve_embedder_path
from raglake.errors import ConfigError


class Encoders:
    """Embedders by weights folder, encoders by (weights, cache folder), scorers by (weights, layer)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._embedders: dict[str, Embedder] = {}
        self._encoders: dict[tuple[str, str], TextEncoder] = {}
        self._scorers: dict[tuple[str, int | None], BertScorer] = {}

    def embedder(self, name_or_path: str | None = None) -> Embedder:
        """The embedder for a name or folder (loaded once)."""
        _, path = resolve_embedder_path(name_or_path)
        with self._lock:
            if str(path) not in self._embedders:
                named = name_or_path not in (None, DEFAULT_EMBEDDER)
                self._embedders[str(path)] = Embedder(str(path) if named else None)
            return self._embedders[str(path)]

    def text_encoder(self, embedder: str | None, cache_root: str | Path | None) -> TextEncoder:
        """The encoder for (embedder, vector cache folder; None: no disk cache)."""
        model = self.embedder(embedder)
        key = (str(model.path), str(cache_root))
        with self._lock:
            if key not in self._encoders:
                self._encoders[key] = TextEncoder(model, EmbeddingCache(cache_root, model.key))
            return self._encoders[key]

    def bert_scorer(self, embedder: Embedder, layer: int | None) -> BertScorer:
        """The BERTScore scorer for an embedder and a hidden layer (None: the model's last)."""
        key = (str(embedder.path), layer)
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
            self._embedders.clear()
            self._encoders.clear()
            self._scorers.clear()


ENCODERS = Encoders()


def get_embedder(name_or_path: str | None = None) -> Embedder:
    """The process's embedder for a name (loaded once, shared by the target and the metrics)."""
    return ENCODERS.embedder(name_or_path)


def text_encoder(embedder: str | None, cache_root: str | Path | None) -> TextEncoder:
    """The process's encoder for (embedder, cache folder): the builtin target and the metrics share it."""
    return ENCODERS.text_encoder(embedder, cache_root)


def default_encoder() -> TextEncoder:
    """The default embedder, without a disk cache."""
    return ENCODERS.text_encoder(None, None)


def bert_scorer(embedder: Embedder, layer: int | None) -> BertScorer:
    return ENCODERS.bert_scorer(embedder, layer)
