"""BERTScore (Zhang et al., 2020; seed 004): contextual token embeddings from a local transformer,
greedy cosine matching, precision / recall / F1, optional idf weights from the run's references.

Tokens are taken from one hidden layer (recorded with the model). As in the reference implementation
(bert_score 0.3.13), [CLS] and [SEP] carry weight 0 but stay in the matrices, so other tokens may match
them. The `bert-score` package agrees to 1e-6 when it pads nothing (batch_size=1; short, long and
negative-best-match pairs in tests/test_bertscore.py); batched, it lets padded positions into the max
with similarity 0, which floors a negative best match at 0 (docs/bertscore.md): raglake's max runs over
real tokens only. A text longer than the model's max sequence is embedded in consecutive windows (each
with its own [CLS]/[SEP]), so no token is dropped, where the reference truncates. Values are not
comparable across models or layers."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from raglake.embed.model import Embedder

BERTSCORE_VERSION = "1"


@dataclass(frozen=True)
class BertScore:
    precision: float
    recall: float
    f1: float


def idf_weights(token_ids: Sequence[Sequence[int]]) -> dict[int, float]:
    """idf(w) = log((M + 1) / (df(w) + 1)) over M reference texts (bert_score's smoothing)."""
    m = len(token_ids)
    df = Counter(t for ids in token_ids for t in set(ids))
    return {t: math.log((m + 1) / (n + 1)) for t, n in df.items()} | {-1: math.log(m + 1)}


def greedy_match(cand: np.ndarray, ref: np.ndarray, cand_w: np.ndarray, ref_w: np.ndarray) -> BertScore:
    """P = Σ_i w_i max_j cos(x_i, y_j) / Σ w_i over candidate tokens; R likewise over reference tokens."""
    sim = cand @ ref.T
    p = float((sim.max(axis=1) * cand_w).sum() / cand_w.sum()) if cand_w.sum() > 0 else float("nan")
    r = float((sim.max(axis=0) * ref_w).sum() / ref_w.sum()) if ref_w.sum() > 0 else float("nan")
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return BertScore(p, r, f)


class BertScorer:
    def __init__(self, embedder: Embedder, layer: int | None = None, batch_size: int = 32):
        self.embedder, self.batch_size = embedder, batch_size
        self.tokenizer = embedder.model.tokenizer
        n_layers, self.width = embedder.transformer_shape
        self.layer = n_layers if layer is None else layer
        if not 1 <= self.layer <= n_layers:
            raise ValueError(f"BERTScore layer must be 1..{n_layers} for {embedder.name}, got {layer}")
        self.window = max(8, min(embedder.max_sequence, int(self.tokenizer.model_max_length)) - 2)

    @property
    def id(self) -> str:
        return f"{self.embedder.key}:layer{self.layer}"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        if not texts:
            return []
        return self.tokenizer(list(texts), add_special_tokens=False, truncation=False)["input_ids"]

    def embed_tokens(self, ids: Sequence[Sequence[int]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text: normalised contextual embeddings of every window's [CLS] tokens [SEP], and which
        rows are special tokens."""
        windows = [
            (n, list(seq[i : i + self.window])) for n, seq in enumerate(ids) for i in range(0, len(seq), self.window)
        ]
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        pieces: dict[int, np.ndarray] = {}
        cls, sep, pad = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id or 0
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(windows[w][1]) for w in batch) + 2
            input_ids = np.full((len(batch), width), pad, dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, w in enumerate(batch):
                seq = [cls, *windows[w][1], sep]
                input_ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            # on the embedder's device (or in the model's process); the matching runs here on the cpu
            hidden = self.embedder.layer_states(input_ids, mask, self.layer).astype(np.float64)
            for row, w in enumerate(batch):
                vecs = hidden[row, : len(windows[w][1]) + 2]  # [CLS] tokens [SEP]
                pieces[w] = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        dim = self.width
        out_per_text: list[list[np.ndarray]] = [[] for _ in ids]
        specials: list[list[np.ndarray]] = [[] for _ in ids]
        for w, (n, tokens) in enumerate(windows):
            out_per_text[n].append(pieces[w])
            specials[n].append(np.array([True] + [False] * len(tokens) + [True]))
        return [
            (np.concatenate(parts), np.concatenate(flags)) if parts else (np.zeros((0, dim)), np.zeros(0, bool))
            for parts, flags in zip(out_per_text, specials)
        ]

    def score(
        self, candidates: Sequence[str], references: Sequence[str], idf: dict[int, float] | None = None
    ) -> list[BertScore | None]:
        """BERTScore of each (candidate, reference) pair; None where either side has no tokens."""
        texts = list(dict.fromkeys([*candidates, *references]))
        ids = self.token_ids(texts)
        embedded = dict(zip(texts, self.embed_tokens(ids)))
        token_ids = dict(zip(texts, ids))
        out: list[BertScore | None] = []
        for cand, ref in zip(candidates, references):
            if not token_ids[cand] or not token_ids[ref]:
                out.append(None)
                continue
            (c_vecs, c_special), (r_vecs, r_special) = embedded[cand], embedded[ref]
            out.append(
                greedy_match(
                    c_vecs,
                    r_vecs,
                    self._weights(token_ids[cand], c_special, idf),
                    self._weights(token_ids[ref], r_special, idf),
                )
            )
        return out

    def _weights(self, ids: Sequence[int], special: np.ndarray, idf: dict[int, float] | None) -> np.ndarray:
        """Weight per matrix row: 0 for [CLS]/[SEP], idf (or 1) for the text's own tokens, in order."""
        weights = np.zeros(len(special))
        weights[~special] = [idf.get(t, idf[-1]) for t in ids] if idf else 1.0
        return weights
