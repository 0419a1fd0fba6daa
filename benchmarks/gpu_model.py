"""The model folder benchmarks/gpu_embedding.py takes to a lent GPU machine, which has no raglake model
package and takes at most 64 MiB of files a call (the packaged all-MiniLM-L6-v2 is 87 MiB in float32).

    python benchmarks/gpu_model.py [--dest .gpumodel] [--source FOLDER]

packs the packaged model (or --source) into --dest: its configuration and tokenizer files unchanged, its
weights rounded to float16 (`model.fp16.safetensors`, 43 MiB), `reference.npz` (REFERENCE_TEXTS and the
float32 model's vectors of them, made here with sentence-transformers on the cpu) and `packed.json` (what
was packed, from what). On the machine `materialise` writes a model folder of the packed weights widened
back to float32 (the architecture, tokenizer, sequence length and float32 arithmetic of the packaged model;
its weights within fp16 rounding of the packaged ones, so that its vectors can be checked against
`reference.npz`), or, with random=True, of randomly initialised float32 weights of the same architecture
(the same throughput; values meaningless)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from _common import ROOT

sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

FP16_WEIGHTS = "model.fp16.safetensors"
REFERENCE = "reference.npz"
PACKED = "packed.json"
# what a sentence-transformers folder of a BERT model needs besides its weights (2_Normalize has no files)
MODEL_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
REFERENCE_TEXTS = (
    "What does my note on the quarterly budget say?",
    "The release was moved to the second week of March after the security review.",
    "I couldn't find that in your notes.",
    "Yes: the backup job runs nightly at 02:00 and keeps fourteen days of snapshots.",
    "Remind me: who owns the on-call rota for the payments service?",
    "According to the notes, the vendor contract renews automatically unless cancelled 60 days ahead.",
    "## Decisions\nWe keep PostgreSQL for the ledger; the analytics store moves to Parquet on S3. [1]",
    " ".join(["A long paragraph of meeting notes that goes on past the model's sequence length."] * 30),
)


def pack(source: Path, dest: Path) -> dict:
    """Write the packed folder (see the module docstring); returns what packed.json holds."""
    import torch
    from safetensors.torch import load_file, save_file
    from sentence_transformers import SentenceTransformer

    dest.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / name, dest / name)
    weights = load_file(str(source / "model.safetensors"))
    save_file({k: v.to(torch.float16) for k, v in weights.items()}, str(dest / FP16_WEIGHTS), metadata={"format": "pt"})
    model = SentenceTransformer(str(source), device="cpu")
    vectors = model.encode(list(REFERENCE_TEXTS), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    np.savez(dest / REFERENCE, texts=np.asarray(REFERENCE_TEXTS, dtype=str), vectors=vectors.astype(np.float32))
    info = {
        "source": str(source),
        "weights": f"{FP16_WEIGHTS}: the source's float32 weights rounded to float16, widened back on the machine",
        "tensors": len(weights),
        "parameters": int(sum(v.numel() for v in weights.values())),
        "reference": f"{REFERENCE}: {len(REFERENCE_TEXTS)} texts, the float32 source's vectors (cpu)",
    }
    (dest / PACKED).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def materialise(packed: Path, folder: Path, *, random: bool = False, seed: int = 0) -> str:
    """A sentence-transformers model folder at `folder` (named like the model) from a packed folder, or from
    any model folder (copied as it is when it holds model.safetensors and random is False); returns how its
    weights were made, for the report."""
    import torch
    from safetensors.torch import load_file, save_file

    folder.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(packed / name, folder / name)
    if random:
        from transformers import BertConfig, BertModel

        torch.manual_seed(seed)
        model = BertModel(BertConfig.from_pretrained(str(packed))).float()  # with the pooler, as packed
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return f"RANDOM float32 weights of the same architecture (torch seed {seed}; values meaningless)"
    if (packed / FP16_WEIGHTS).exists():
        weights = load_file(str(packed / FP16_WEIGHTS))
        save_file(
            {k: v.to(torch.float32) for k, v in weights.items()},
            str(folder / "model.safetensors"),
            metadata={"format": "pt"},
        )
        return "the packaged weights rounded to float16 when packed, loaded as float32"
    shutil.copyfile(packed / "model.safetensors", folder / "model.safetensors")
    return "the folder's own weights, as they are"


def reference_check(packed: Path, encode) -> dict | None:  # noqa: ANN001 - encode(texts) -> (n, d) array
    """How far this model's vectors of the reference texts are from the packed float32 source's: the largest
    1 - cos (None without a reference file)."""
    if not (packed / REFERENCE).exists():
        return None
    with np.load(packed / REFERENCE, allow_pickle=False) as data:
        texts, expected = data["texts"].tolist(), data["vectors"]
    got = np.asarray(encode(texts), dtype=np.float64)
    cos = np.sum(got * expected, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    return {"texts": len(texts), "max_one_minus_cos": float(np.max(1.0 - cos))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=ROOT / ".gpumodel")
    ap.add_argument("--source", type=Path, help="a sentence-transformers folder (default: the packaged model)")
    args = ap.parse_args(argv)
    from raglake.embed.model import resolve_embedder_path

    source = args.source or resolve_embedder_path(None)[1]
    info = pack(source, args.dest)
    size = sum(p.stat().st_size for p in args.dest.rglob("*") if p.is_file())
    print(json.dumps(info, indent=2))
    print(f"packed into {args.dest}: {size / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
