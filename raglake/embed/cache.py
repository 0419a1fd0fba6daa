"""Vectors cached on disk by (embedder key, text hash), so a text is encoded once across runs.

Each embedder has its own folder of append-only shards (`shard-*.npz`: keys + float32 vectors),
each written atomically; a reader loads every shard once per process.

The device is part of the folder, not of the embedder key: vectors made on a GPU agree with the CPU's
to about 1e-6 but not bit for bit, so a CPU run only ever reads CPU-made vectors (its scores are
reproducible whatever ran on the lake before) while the key recorded on scores, which says which model
made them, stays the same on every device. The CPU's folder is named by the key alone, as before."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from raglake import progress
from raglake.embed.model import Embedder

_PROGRESS_SLICE = 1024  # texts per encode call while a progress bar is shown


def default_cache_root(lake_url: str) -> Path:
    """$RAGLAKE_CACHE, else <lake>/_cache for a local lake, else ~/.cache/raglake."""
    if os.environ.get("RAGLAKE_CACHE"):
        return Path(os.environ["RAGLAKE_CACHE"])
    if "://" not in lake_url or lake_url.startswith("file://"):
        return Path(lake_url.removeprefix("file://")) / "_cache"
    return Path.home() / ".cache" / "raglake"


def cache_folder_name(embedder_key: str, device: str = "cpu") -> str:
    """The vector cache folder of an embedder on a device: the key alone for cpu, key@device otherwise."""
    name = embedder_key if device == "cpu" else f"{embedder_key}@{device}"
    return re.sub(r"[^A-Za-z0-9._@-]+", "_", name)


@lru_cache(maxsize=8192)  # a run asks for the same texts' keys many times (collect, encode, each batch)
def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


@dataclass
class EncodeStats:
    requested: int = 0  # texts asked for
    distinct: int = 0  # distinct texts among them
    cached: int = 0  # distinct texts found in the cache
    encoded: int = 0  # distinct texts the model encoded
    seconds_encoding: float = 0.0
    by_caller: dict[str, int] = field(default_factory=dict)


class EmbeddingCache:
    """Vectors by text key; on disk under `root` (shared across runs), or in memory only when root is None."""

    def __init__(self, root: str | Path | None, embedder_key: str, device: str = "cpu"):
        self.folder = Path(root) / cache_folder_name(embedder_key, device) if root else None
        self._vectors: dict[str, np.ndarray] | None = None
        self._lock = threading.Lock()

    def _load(self) -> dict[str, np.ndarray]:
        if self._vectors is None:
            vectors: dict[str, np.ndarray] = {}
            for shard in sorted(self.folder.glob("shard-*.npz")) if self.folder else ():
                with np.load(shard, allow_pickle=False) as data:
                    vectors.update(zip(data["keys"].tolist(), data["vectors"]))
            self._vectors = vectors
        return self._vectors

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            stored = self._load()
            return {k: stored[k] for k in keys if k in stored}

    def put(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        if not len(keys):
            return
        with self._lock:
            self._load().update(zip(keys, vectors))
            if self.folder is None:
                return
            self.folder.mkdir(parents=True, exist_ok=True)
            name = f"shard-{uuid.uuid4().hex}"
            tmp = self.folder / f".{name}.npz.tmp"
            with tmp.open("wb") as f:
                np.savez(f, keys=np.asarray(keys, dtype=str), vectors=np.asarray(vectors, dtype=np.float32))
            os.replace(tmp, self.folder / f"{name}.npz")


class TextEncoder:
    """Encode-once front of an embedder: deduplicates, reads the cache, encodes only what is missing."""

    def __init__(self, embedder: Embedder, cache: EmbeddingCache | None):
        self.embedder, self.cache = embedder, cache
        self.stats = EncodeStats()

    def _encode_reporting(self, texts: list[str]) -> np.ndarray:
        """The embedder's encode, longest text first (as sentence-transformers orders each call, so a batch
        holds texts of about one length and pads little), in the given order again on return; with a
        progress display, in slices so the bar moves: sorted first, every slice is of like lengths too."""
        progress.start("encoding", len(texts), "texts")
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        ordered = [texts[i] for i in order]
        if not progress.active() or len(texts) <= _PROGRESS_SLICE:
            vectors = self.embedder.encode(ordered)
            progress.advance("encoding", len(texts))
        else:
            parts = []
            for start in range(0, len(ordered), _PROGRESS_SLICE):
                parts.append(self.embedder.encode(ordered[start : start + _PROGRESS_SLICE]))
                progress.advance("encoding", len(parts[-1]))
            vectors = np.concatenate(parts)
        restored = np.empty_like(vectors)
        restored[np.asarray(order, dtype=np.intp)] = vectors
        return restored

    def encode(self, texts: Sequence[str], caller: str = "") -> np.ndarray:
        """Vectors aligned with `texts` (duplicates share one encoding)."""
        keys = [text_key(t) for t in texts]
        distinct = dict(zip(keys, texts))
        found = self.cache.get(list(distinct)) if self.cache else {}
        missing = [k for k in distinct if k not in found]
        if missing:
            t0 = time.perf_counter()
            fresh = self._encode_reporting([distinct[k] for k in missing])
            self.stats.seconds_encoding += time.perf_counter() - t0
            found.update(zip(missing, fresh))
            if self.cache:
                self.cache.put(missing, fresh)
        self.stats.requested += len(texts)
        self.stats.distinct += len(distinct)
        self.stats.cached += len(distinct) - len(missing)
        self.stats.encoded += len(missing)
        if caller:
            self.stats.by_caller[caller] = self.stats.by_caller.get(caller, 0) + len(missing)
        if not keys:
            return np.zeros((0, self.embedder.dimension), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
