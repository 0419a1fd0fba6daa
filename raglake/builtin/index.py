"""The builtin target's index over a folder of notes: chunks, their vectors, and the manifest
(coverage stats, METRICS.md §6) that says what was indexed and what was skipped, and why."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from raglake.builtin.chunker import CHUNKER_VERSION, Chunk, ChunkSettings, chunk_note
from raglake.builtin.markdown import parse_note
from raglake.embed.cache import TextEncoder
from raglake.errors import ConfigError
from raglake.metrics.operational import percentile

SUPPORTED = (".md", ".markdown")


@dataclass
class DocEntry:
    rel_path: str
    doc_type: str  # the file extension, e.g. ".md"
    status: str  # indexed | no_chunks | skipped
    reason: str | None = None  # unsupported_type | empty_file | front_matter_only | only_empty_sections | unreadable
    n_chunks: int = 0
    n_skipped: int = 0


@dataclass
class IndexManifest:
    corpus: str
    chunker_version: str
    embedding_model: str
    index_version: str
    settings: dict[str, Any]
    docs: list[DocEntry] = field(default_factory=list)
    chunks_attempted: int = 0
    chunks_embedded: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    token_counts: list[int] = field(default_factory=list)

    @property
    def doc_paths(self) -> frozenset[str]:
        return frozenset(d.rel_path for d in self.docs)

    def stats(self) -> dict[str, Any]:
        processed = [d for d in self.docs if d.status != "skipped"]
        tokens = self.token_counts
        return {
            "docs_seen": len(self.docs),
            "docs_processed": len(processed),
            "docs_with_zero_chunks": sum(d.status == "no_chunks" for d in processed),
            "docs_skipped": sum(d.status == "skipped" for d in self.docs),
            "chunks_attempted": self.chunks_attempted,
            "chunks_embedded": self.chunks_embedded,
            "chunks_skipped": sum(self.skipped_by_reason.values()),
            "tokens_per_chunk_min": min(tokens) if tokens else None,
            "tokens_per_chunk_max": max(tokens) if tokens else None,
            "tokens_per_chunk_mean": float(np.mean(tokens)) if tokens else None,
            "tokens_per_chunk_p95": percentile(tokens, 95) if tokens else None,
        }

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexManifest:
        """A manifest as a service exposes it (the shape of to_json)."""
        fields = dict(data)
        fields["docs"] = [DocEntry(**d) for d in fields.get("docs", [])]
        return cls(**fields)

    def info(self) -> dict[str, Any]:
        """What the run records about its index (runs.index_info)."""
        return {
            "corpus": self.corpus,
            "chunker_version": self.chunker_version,
            "embedding_model": self.embedding_model,
            "index_version": self.index_version,
            "settings": self.settings,
            **self.stats(),
            "skipped_by_reason": self.skipped_by_reason,
            "doc_paths": sorted(self.doc_paths),
        }

    def coverage_columns(self) -> dict[str, list[Any]]:
        """Long rows for the lake's `coverage` table: (stat, doc_type, reason, value)."""
        rows: list[tuple[str, str | None, str | None, float]] = []
        for stat, value in self.stats().items():
            if value is not None:
                rows.append((stat, None, None, float(value)))
        for reason, n in sorted(self.skipped_by_reason.items()):
            rows.append(("chunks_skipped", None, reason, float(n)))
        for reason, n in sorted(Counter(d.reason for d in self.docs if d.reason).items()):
            rows.append(("docs_not_indexed", None, reason, float(n)))
        for doc_type in sorted({d.doc_type for d in self.docs}):
            docs = [d for d in self.docs if d.doc_type == doc_type]
            rows += [
                ("docs", doc_type, None, float(len(docs))),
                ("docs_with_chunks", doc_type, None, float(sum(d.n_chunks > 0 for d in docs))),
                ("chunks_embedded", doc_type, None, float(sum(d.n_chunks for d in docs))),
                ("chunks_skipped", doc_type, None, float(sum(d.n_skipped for d in docs))),
            ]
        return {
            "index_version": [self.index_version] * len(rows),
            "stat": [r[0] for r in rows],
            "doc_type": [r[1] for r in rows],
            "reason": [r[2] for r in rows],
            "value": [r[3] for r in rows],
        }


@dataclass
class Index:
    chunks: list[Chunk]
    vectors: np.ndarray  # (n_chunks, dim), L2-normalised
    manifest: IndexManifest
    folders: dict[str, np.ndarray]  # folder -> chunk row indexes


def folder_of(rel_path: str) -> str:
    """The scoping unit: the first two folders ('work/projects'), or the vault for a note at its root."""
    parts = rel_path.split("/")[:-1]
    return "/".join(parts[:2]) if parts else ""


def corpus_files(corpus: Path) -> list[Path]:
    if not corpus.is_dir():
        raise ConfigError(f"corpus folder {corpus} does not exist")
    return sorted(
        p for p in corpus.rglob("*") if p.is_file() and not any(s.startswith(".") for s in p.relative_to(corpus).parts)
    )


def index_version(corpus: Path, files: list[Path], settings: ChunkSettings, embedder_key: str) -> str:
    """Hash of corpus content (paths and bytes) + chunker version and settings + embedder."""
    h = hashlib.sha256(json.dumps([CHUNKER_VERSION, asdict(settings), embedder_key]).encode())
    for p in files:
        h.update(p.relative_to(corpus).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()[:16]


def _why_no_chunks(raw: str, skipped_reasons: list[str]) -> str:
    if not raw.strip():
        return "empty_file"
    note = parse_note(raw)
    if not note.sections:
        return "front_matter_only" if note.front_matter else "no_text"
    return (
        "only_empty_sections"
        if skipped_reasons and all(r == "empty_section" for r in skipped_reasons)
        else "all_chunks_skipped"
    )


def build_index(corpus: str | Path, encoder: TextEncoder, settings: ChunkSettings) -> Index:
    corpus = Path(corpus)
    files = corpus_files(corpus)
    embedder = encoder.embedder
    manifest = IndexManifest(
        str(corpus),
        CHUNKER_VERSION,
        embedder.key,
        index_version(corpus, files, settings, embedder.key),
        asdict(settings),
    )
    chunks: list[Chunk] = []
    skipped_reasons: Counter[str] = Counter()
    for path in files:
        rel = path.relative_to(corpus).as_posix()
        entry = DocEntry(rel, path.suffix.lower() or "(none)", "indexed")
        manifest.docs.append(entry)
        if entry.doc_type not in SUPPORTED:
            entry.status, entry.reason = "skipped", "unsupported_type"
            continue
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            entry.status, entry.reason = "no_chunks", "unreadable"
            continue
        doc_chunks, doc_skipped = chunk_note(rel, raw, settings, embedder.count_tokens, embedder.max_sequence)
        entry.n_chunks, entry.n_skipped = len(doc_chunks), len(doc_skipped)
        skipped_reasons.update(s.reason for s in doc_skipped)
        manifest.chunks_attempted += len(doc_chunks) + len(doc_skipped)
        if not doc_chunks:
            entry.status, entry.reason = "no_chunks", _why_no_chunks(raw, [s.reason for s in doc_skipped])
        chunks.extend(doc_chunks)
    vectors = encoder.encode([c.embed_text for c in chunks], caller="index")
    manifest.chunks_embedded = len(chunks)
    manifest.skipped_by_reason = dict(sorted(skipped_reasons.items()))
    manifest.token_counts = [c.n_tokens for c in chunks]
    folders: dict[str, list[int]] = {}
    for i, c in enumerate(chunks):
        folders.setdefault(folder_of(c.rel_path), []).append(i)
    return Index(chunks, vectors, manifest, {f: np.asarray(ix) for f, ix in folders.items()})
