"""BERTScore (Zhang et al., 2020; seed 004): contextual token embeddings from a local transformer,
greedy cosine matching, precision / recall / F1, optional idf weights from the run's references.

Tokens are taken from one hidden layer (recorded with the model); [CLS] and [SEP] are excluded, as in
the reference implementation. A text longer than the model's max sequence is embedded in consecutive
windows, so no token is dropped. Values are not comparable across models or layers."""

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
        transformer = embedder.model[0]
        self.model = transformer.auto_model
        self.tokenizer = embedder.model.tokenizer
        n_layers = int(self.model.config.num_hidden_layers)
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

    def embed_tokens(self, ids: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Normalised contextual embeddings, one (n_tokens, dim) matrix per text."""
        import torch

        windows = [(n, list(seq[i : i + self.window])) for n, seq in enumerate(ids) for i in range(0, len(seq), self.window)]
        order = sorted(range(len(windows)), key=lambda w: len(windows[w][1]))
        pieces: dict[int, np.ndarray] = {}
        cls, sep, pad = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id or 0
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            width = max(len(windows[w][1]) for w in batch) + 2
            input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, w in enumerate(batch):
                seq = [cls, *windows[w][1], sep]
                input_ids[row, : len(seq)] = torch.tensor(seq)
                mask[row, : len(seq)] = 1
            with torch.no_grad():
                out = self.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
            hidden = out.hidden_states[self.layer].numpy()
            for row, w in enumerate(batch):
                vecs = hidden[row, 1 : 1 + len(windows[w][1])]
                pieces[w] = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        dim = int(self.model.config.hidden_size)
        out_per_text: list[list[np.ndarray]] = [[] for _ in ids]
        for w, (n, _) in enumerate(windows):
            out_per_text[n].append(pieces[w])
        return [np.concatenate(parts) if parts else np.zeros((0, dim), np.float32) for parts in out_per_text]

    def score(self, candidates: Sequence[str], references: Sequence[str],
              idf: dict[int, float] | None = None) -> list[BertScore | None]:
        """BERTScore of each (candidate, reference) pair; None where either side has no tokens."""
        texts = list(dict.fromkeys([*candidates, *references]))
        ids = self.token_ids(texts)
        embedded = dict(zip(texts, self.embed_tokens(ids)))
        token_ids = dict(zip(texts, ids))
        out: list[BertScore | None] = []
        for cand, ref in zip(candidates, references):
            c_ids, r_ids = token_ids[cand], token_ids[ref]
            if not c_ids or not r_ids:
                out.append(None)
                continue
            weight = (lambda seq: np.array([idf.get(t, idf[-1]) for t in seq])) if idf else (lambda seq: np.ones(len(seq)))
            out.append(greedy_match(embedded[cand], embedded[ref], weight(c_ids), weight(r_ids)))
        return out
