"""`builtin[:CORPUS_DIR][?option=value&…]`: the reference RAG over a folder of markdown notes, so a
fresh machine has a live system to evaluate. Options: folder_mode, folders, top_k, abstain_below,
fallback_below, max_tokens, overlap_tokens."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import asdict, fields
from pathlib import Path
from urllib.parse import parse_qsl

from raglake.builtin.chunker import ChunkSettings
from raglake.builtin.index import Index, IndexManifest, build_index, corpus_files, index_version
from raglake.builtin.rag import METHOD, RagSettings, ReferenceRag
from raglake.embed.cache import TextEncoder, default_cache_root
from raglake.embed.encoders import get_embedder, text_encoder
from raglake.errors import ConfigError, UnknownNameError, unexpected_error
from raglake.golden import GoldenSet
from raglake.schemas import Capture, GoldenCase
from raglake.targets.base import safe_name

DEFAULT_CORPUS = "data/corpus"


def _options(query: str) -> tuple[RagSettings, ChunkSettings]:
    rag_names = {f.name: f.type for f in fields(RagSettings)}
    chunk_names = {f.name: f.type for f in fields(ChunkSettings)}
    rag, chunk = {}, {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        if key not in rag_names and key not in chunk_names:
            raise UnknownNameError("builtin target option", key, [*rag_names, *chunk_names])
        kind = (rag_names | chunk_names)[key]
        try:
            parsed = value if kind == "str" else (float(value) if kind == "float" else int(value))
        except ValueError:
            raise ConfigError(f"builtin target option {key}={value!r} must be a {kind}") from None
        (rag if key in rag_names else chunk)[key] = parsed
    try:
        return RagSettings(**rag), ChunkSettings(**chunk)
    except ValueError as e:
        raise ConfigError(str(e)) from None


class BuiltinTarget:
    kind = "builtin"
    deterministic = True

    def __init__(self, arg: str, lake_url: str, embedder: str | None = None):
        corpus, _, query = (arg or DEFAULT_CORPUS).partition("?")
        self.corpus = Path(corpus or DEFAULT_CORPUS)
        self.rag_settings, self.chunk_settings = _options(query)
        self.spec = f"builtin:{self.corpus.as_posix()}" + (f"?{query}" if query else "")
        options = "_".join(f"{k}-{v}" for k, v in parse_qsl(query))
        self.name = safe_name(f"builtin_{options}") if options else "builtin"
        self._embedder_name = embedder
        self._cache_root = str(default_cache_root(lake_url) / "embeddings")
        self._lock = threading.Lock()
        self._rag: ReferenceRag | None = None
        self.index_seconds: float | None = None

    @property
    def encoder(self) -> TextEncoder:
        return self._ensure().encoder

    def _ensure(self) -> ReferenceRag:
        """Build the index once (thread-safe: capture batches may run in parallel)."""
        with self._lock:
            if self._rag is None:
                encoder = text_encoder(self._embedder_name, self._cache_root)
                t0 = time.perf_counter()
                index: Index = build_index(self.corpus, encoder, self.chunk_settings)
                self.index_seconds = time.perf_counter() - t0
                self._rag = ReferenceRag(index, encoder, self.rag_settings)
            return self._rag

    def content_key(self) -> str:
        embedder = get_embedder(self._embedder_name)
        version = index_version(self.corpus, corpus_files(self.corpus), self.chunk_settings, embedder.key)
        settings = json.dumps(asdict(self.rag_settings), sort_keys=True)
        return f"builtin:{version}:{hashlib.sha256(settings.encode()).hexdigest()[:12]}"

    def check(self, golden: GoldenSet) -> None:
        if not self.corpus.is_dir():
            raise ConfigError(f"builtin target: corpus folder {self.corpus} does not exist")
        get_embedder(self._embedder_name)  # a bad --embedder fails here, before any work

    def capture(self, cases: list[GoldenCase], journal: object = None) -> list[Capture]:
        rag = self._ensure()
        t0 = time.perf_counter()
        vectors = rag.encoder.encode([c.question for c in cases], caller="builtin_question")
        share_ms = (time.perf_counter() - t0) * 1000 / max(1, len(cases))
        out = []
        for case, vector in zip(cases, vectors):
            t = time.perf_counter()
            try:
                capture = rag.query(case.id, vector, share_ms)
            except Exception as e:  # noqa: BLE001 - one case's surprise is that case's error, never the batch's
                capture = Capture(case_id=case.id, status="error", error=unexpected_error(e), method=METHOD)
            capture.latency_ms.wall = round((time.perf_counter() - t) * 1000 + share_ms, 3)
            out.append(capture)
        return out

    def known_docs(self) -> frozenset[str]:
        return self._ensure().index.manifest.doc_paths

    def manifest(self) -> IndexManifest:
        return self._ensure().index.manifest
