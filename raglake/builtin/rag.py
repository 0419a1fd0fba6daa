"""The reference RAG over the index: optional folder scoping, top-K cosine retrieval, and an
extractive answer of the best sentences with [n] citations, or an abstention."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from raglake.builtin.index import Index
from raglake.embed.cache import TextEncoder
from raglake.errors import ConfigError
from raglake.schemas import FOLDER_MODES, Capture
from raglake.text.sentences import split_sentences

NO_ANSWER = "I could not find this in the notes."
METHOD = "builtin_dense"


@dataclass(frozen=True)
class RagSettings:
    top_k: int = 10  # chunks returned per question
    folder_mode: str = "on_with_fallback"  # off | on | on_with_fallback
    folders: int = 2  # folders the selector keeps
    fallback_below: float = 0.45  # on_with_fallback: search everything when the best scoped chunk scores less
    abstain_below: float = 0.5  # abstain when the best chunk scores less (tuned on the sample: NOTES.md)
    answer_chunks: int = 3  # chunks the extractive answer draws sentences from
    answer_sentences: int = 2

    def __post_init__(self) -> None:
        if self.folder_mode not in FOLDER_MODES:
            raise ConfigError(f"folder_mode must be one of {', '.join(FOLDER_MODES)}, got {self.folder_mode!r}")
        if self.top_k < 1 or self.folders < 1 or self.answer_chunks < 1 or self.answer_sentences < 1:
            raise ConfigError(f"builtin target settings must be positive: {self}")


class ReferenceRag:
    def __init__(self, index: Index, encoder: TextEncoder, settings: RagSettings):
        self.index, self.encoder, self.settings = index, encoder, settings
        names = sorted(index.folders)
        self._folder_names = names
        centroids = (
            np.stack([index.vectors[index.folders[f]].mean(axis=0) for f in names]) if names else np.zeros((0, 1))
        )
        norms = np.linalg.norm(centroids, axis=1, keepdims=True) if names else 1
        self._centroids = centroids / np.where(norms == 0, 1, norms)

    def _select_folders(self, q: np.ndarray) -> list[str]:
        scores = self._centroids @ q
        best = np.argsort(-scores, kind="stable")[: self.settings.folders]
        return [self._folder_names[i] for i in best]

    def _search(self, q: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        vectors = self.index.vectors if rows is None else self.index.vectors[rows]
        scores = vectors @ q
        order = np.argsort(-scores, kind="stable")[: self.settings.top_k]
        ids = order if rows is None else rows[order]
        return ids, scores[order]

    def _answer(self, question_vec: np.ndarray, ids: np.ndarray) -> tuple[str, list[int]]:
        """Best sentences of the top chunks, in reading order, each cited [rank]."""
        candidates: list[tuple[int, int, str]] = []  # (rank, position, sentence)
        for rank, cid in enumerate(ids[: self.settings.answer_chunks], start=1):
            body = self.index.chunks[cid].text.split("\n\n", 1)[-1]
            for pos, sentence in enumerate(split_sentences(body)):
                if len(sentence) >= 20:
                    candidates.append((rank, pos, sentence))
        if not candidates:
            return "", []
        vectors = self.encoder.encode([c[2] for c in candidates], caller="builtin_answer")
        best = np.argsort(-(vectors @ question_vec), kind="stable")[: self.settings.answer_sentences]
        chosen = sorted(candidates[i] for i in best)
        answer = " ".join(f"{s.rstrip()} [{rank}]" for rank, _, s in chosen)
        return answer, sorted({rank for rank, _, _ in chosen})

    def query(self, case_id: str, question_vec: np.ndarray, encode_ms: float) -> Capture:
        s = self.settings
        t0 = time.perf_counter()
        selected: list[str] = []
        rows = None
        if s.folder_mode != "off":
            selected = self._select_folders(question_vec)
            rows = np.concatenate([self.index.folders[f] for f in selected])
        t1 = time.perf_counter()
        ids, scores = self._search(question_vec, rows)
        if s.folder_mode == "on_with_fallback" and (not len(scores) or scores[0] < s.fallback_below):
            ids, scores = self._search(question_vec, None)
        t2 = time.perf_counter()
        abstained = not len(scores) or float(scores[0]) < s.abstain_below
        answer, cited = (NO_ANSWER, []) if abstained else self._answer(question_vec, ids)
        if not abstained and not answer:
            abstained, answer = True, NO_ANSWER
        t3 = time.perf_counter()
        chunks = [self.index.chunks[i] for i in ids]
        retrieved = [
            {
                "rank": r,
                "rel_path": c.rel_path,
                "heading_path": list(c.heading_path),
                "text": c.text,
                "score": round(float(sc), 6),
                "chunk_id": f"{c.rel_path}#{'/'.join(c.heading_path)}#{c.part}",
            }
            for r, (c, sc) in enumerate(zip(chunks, scores), start=1)
        ]
        references = [
            {"rel_path": chunks[r - 1].rel_path, "heading_path": list(chunks[r - 1].heading_path)} for r in cited
        ]
        ms = lambda a, b: round((b - a) * 1000, 3)  # noqa: E731
        latency = {
            "folder_selection": ms(t0, t1),
            "retrieval": round(encode_ms + (t2 - t1) * 1000, 3),
            "generation": ms(t2, t3),
        }
        latency["total"] = round(sum(latency.values()), 3)
        return Capture.model_validate(
            {
                "case_id": case_id,
                "answer": answer,
                "abstained": abstained,
                "references": references,
                "retrieved": retrieved,
                "method": METHOD,
                "latency_ms": latency,
                "folder_mode": s.folder_mode,
                "selected_folders": selected,
            }
        )
