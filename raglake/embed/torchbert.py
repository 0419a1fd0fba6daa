"""The packaged all-MiniLM-L6-v2 on the cpu through torch and `tokenizers` alone, without importing
sentence-transformers or transformers (~1.5 s to load on the cpu instead of ~6.5 s: those two import
scikit-learn, scipy, pandas, torch._dynamo and torch.distributed, which a run never uses).

It is sentence-transformers 6.2's pipeline for this model, Transformer(BertModel, sdpa) → mean Pooling →
Normalize, written out op for op in the same order (and batched as `SentenceTransformer.encode` batches:
sorted by descending length in characters, `batch_size` at a time), so its vectors and hidden states equal
theirs bit for bit; tests/test_torchbert.py checks that on several hundred texts. raglake.embed.model
uses it for the packaged default on the cpu only; any other folder or device loads sentence-transformers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file

from raglake.embed.bertfiles import BertShape, BertTokenizer, unsupported


class TorchTokenizer(BertTokenizer):
    """The model's tokenizer, with the padded tensors of a batch that the forward pass takes."""

    def padded(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(input ids, attention mask) of a batch: special tokens, truncated to the model's length, padded
        on the right to the longest."""
        encoded = [e.ids for e in self._cut.encode_batch(list(texts))]
        width = max(len(ids) for ids in encoded)
        input_ids = torch.full((len(encoded), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            input_ids[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[row, : len(ids)] = 1
        return input_ids, mask


class TorchBert:
    """The model's weights as tensors and its forward pass; the subset of a SentenceTransformer's interface
    raglake uses (`encode`, `tokenizer`, `max_seq_length`, `get_embedding_dimension`, `device`), plus
    `hidden_states` for BERTScore."""

    def __init__(self, folder: str | Path, device: str = "cpu"):
        folder = Path(folder)
        why = unsupported(folder)
        if why:
            raise ValueError(f"{folder} cannot run without sentence-transformers: {why}")
        shape = BertShape(folder)
        self.device = torch.device(device)
        self.num_layers, self.hidden_size = shape.num_layers, shape.hidden_size
        self.heads, self.eps = shape.heads, shape.eps
        try:
            weights = load_file(str(folder / "model.safetensors"), device=str(self.device))
        except SafetensorError as e:
            raise ValueError(f"{folder / 'model.safetensors'}: {e}") from None
        self.w = {name.removeprefix("bert."): tensor for name, tensor in weights.items()}
        self.max_seq_length = shape.max_seq_length
        self.tokenizer = TorchTokenizer(folder, self.max_seq_length)

    def get_embedding_dimension(self) -> int:
        return self.hidden_size

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (self.hidden_size,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    @torch.inference_mode()
    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
        """transformers' BertModel hidden states: the embeddings, then each layer's output."""
        w, (batch, width) = self.w, input_ids.shape
        positions = torch.arange(width, device=input_ids.device).unsqueeze(0)
        x = F.embedding(input_ids, w["embeddings.word_embeddings.weight"], 0)
        x = x + F.embedding(torch.zeros_like(input_ids), w["embeddings.token_type_embeddings.weight"])
        x = self._norm(x + F.embedding(positions, w["embeddings.position_embeddings.weight"]), "embeddings.LayerNorm")
        # transformers passes sdpa no mask when nothing is padded, else a boolean (batch, 1, width, width)
        mask = (
            None
            if bool(attention_mask.all())
            else attention_mask.bool()[:, None, None, :].expand(batch, 1, width, width).contiguous()
        )
        head = self.hidden_size // self.heads
        states = [x]
        for i in range(self.num_layers):
            layer = f"encoder.layer.{i}"
            q, k, v = (
                self._linear(x, f"{layer}.attention.self.{p}").view(batch, width, -1, head).transpose(1, 2)
                for p in ("query", "key", "value")
            )
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=head**-0.5)
            a = a.reshape(batch, -1, width, head).transpose(1, 2).contiguous().reshape(batch, width, -1).contiguous()
            a = self._linear(a, f"{layer}.attention.output.dense")
            x = self._norm(a + x, f"{layer}.attention.output.LayerNorm")
            h = self._linear(F.gelu(self._linear(x, f"{layer}.intermediate.dense")), f"{layer}.output.dense")
            x = self._norm(h + x, f"{layer}.output.LayerNorm")
            states.append(x)
        return states

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        convert_to_numpy: bool = True,
        show_progress_bar: bool = False,
    ) -> np.ndarray:
        """Sentence vectors as `SentenceTransformer.encode` gives them (its batches, its pooling, its
        Normalize module, then `normalize_embeddings`)."""
        del convert_to_numpy, show_progress_bar  # always numpy; never a progress bar
        order = np.argsort([-len(t) for t in texts])
        vectors: list[torch.Tensor] = []
        for start in range(0, len(texts), batch_size):
            input_ids, mask = self.tokenizer.padded([texts[i] for i in order[start : start + batch_size]])
            tokens = self.hidden_states(input_ids.to(self.device), mask.to(self.device))[-1]
            weights = mask.to(self.device).unsqueeze(-1).to(tokens.dtype)
            summed = (tokens * weights).sum(dim=1, dtype=tokens.dtype)
            pooled = torch.cat([summed / torch.clamp(weights.sum(dim=1, dtype=tokens.dtype), min=1e-9)], 1)
            pooled = F.normalize(pooled, p=2, dim=-1)  # the Normalize module
            if normalize_embeddings:
                pooled = F.normalize(pooled, p=2, dim=1)
            vectors.extend(pooled.cpu())
        if not vectors:
            return np.zeros((0, self.hidden_size), dtype=np.float32)
        return torch.stack([vectors[i] for i in np.argsort(order)]).numpy()
