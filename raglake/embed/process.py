"""The packaged model on the cpu in a process of its own (issue 29's cold start), so that torch is imported
beside this process's own imports instead of after them, and never in this process: importing torch is
~1 s of Python under the GIL that no thread can hide, and the interpreter's exit then spends ~0.4 s
collecting torch's objects. The other process is `python -m raglake.embed.serve` (raglake.embed.torchbert,
the very forward pass this process would run, so the vectors are equal bit for bit: tests/test_model_process.py);
it answers one request at a time over a socket pair and ends when this process closes its end (or ends).

Used for the packaged default on the cpu when torch is not imported here yet (a process that has torch
loaded already loads the model in ~0.1 s itself) and RAGLAKE_MODEL_PROCESS is not `0`. It answers both what
a run asks of the model: sentence vectors (`encode`) and, for BERTScore, one hidden layer's states of a padded
batch of token ids (`layer_states`); the tokenizer runs here (raglake.embed.bertfiles, no torch).

`start_early` starts one before a run knows it will embed (raglake.api.run: before the API's own imports);
the first RemoteBert of that folder adopts it, and `discard_early` stops it when no run took it."""

from __future__ import annotations

import atexit
import json
import os
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from raglake.children import child_env
from raglake.embed.bertfiles import BertShape, BertTokenizer
from raglake.errors import ConfigError

SWITCH = "RAGLAKE_MODEL_PROCESS"  # "0": the model always loads in this process
_FRAME = struct.Struct("!IQ")  # a header's length (JSON), then the payload's (bytes)


def send(sock: socket.socket, header: dict, payload: bytes | memoryview = b"") -> None:
    """One frame: the header as JSON, then the payload."""
    head = json.dumps(header).encode("utf-8")
    sock.sendall(_FRAME.pack(len(head), len(payload)) + head)
    if len(payload):
        sock.sendall(payload)


def receive(sock: socket.socket) -> tuple[dict, bytearray] | None:
    """The next frame (header, payload), or None when the other end has closed."""
    sizes = _read(sock, _FRAME.size)
    if sizes is None:
        return None
    head_size, payload_size = _FRAME.unpack(sizes)
    head, payload = _read(sock, head_size), _read(sock, payload_size)
    if head is None or payload is None:
        return None
    return json.loads(head), payload


def _read(sock: socket.socket, size: int) -> bytearray | None:
    buffer, got = bytearray(size), 0
    view = memoryview(buffer)
    while got < size:
        n = sock.recv_into(view[got:], min(size - got, 1 << 24))
        if n == 0:
            return None
        got += n
    return buffer


def wanted() -> bool:
    """Whether the packaged model should load in a process of its own: torch not loaded here, and not
    switched off. Any other value of RAGLAKE_MODEL_PROCESS than 0 or 1 is an error, not ignored. POSIX
    only (the socket is handed over as an inherited descriptor)."""
    value = os.environ.get(SWITCH, "1").strip()
    if value not in ("0", "1"):
        raise ConfigError(f"{SWITCH}={value!r}: use 1 (the packaged model in a process of its own) or 0 (in this one)")
    return value == "1" and "torch" not in sys.modules and os.name == "posix"


class ModelProcess:
    """A `python -m raglake.embed.serve` over one model folder: started at once, its model loaded there;
    `ready()` waits for it. Requests go one at a time (a lock), answers come back as float32 arrays."""

    def __init__(self, folder: Path):
        self.folder = folder
        mine, theirs = socket.socketpair()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "raglake.embed.serve", str(theirs.fileno()), str(folder)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # the caller's stdout is its own (a pipe read to its end would wait)
                env=child_env(),
                pass_fds=(theirs.fileno(),),
            )
        except OSError as e:
            mine.close()
            raise ConfigError(
                f"cannot start the embedder's process ({sys.executable} -m raglake.embed.serve): {e}; "
                f"set {SWITCH}=0 to load the model in this process instead"
            ) from None
        finally:
            theirs.close()
        self._socket, self._lock, self._hello = mine, threading.Lock(), None
        self.owner = os.getpid()  # a fork of this process must not use (or stop) it: RemoteBert starts its own
        self.failure: ConfigError | None = None  # the model's load error, raised again by every request
        self.broken = False  # a request cut off halfway (an interrupt): the stream is out of step, never reused
        with _registry_lock:
            _live.setdefault(str(folder), set()).add(self)

    def ready(self) -> dict:
        """The model's figures once it has loaded there; its load error (unreadable weights, a broken
        tokenizer.json) as the ConfigError this process's own load would raise."""
        with self._lock:
            return self._ready()

    def _ready(self) -> dict:
        if self.failure is not None:
            raise self.failure
        if self._hello is None:
            hello, _ = self._answer()
            if not hello.get("ok"):
                self.failure = ConfigError(f"cannot load embedder from {self.folder}: {hello['error']}")
                raise self.failure
            self._hello = hello
        return self._hello

    def encode(self, texts: Sequence[str], batch_size: int, normalize: bool) -> np.ndarray:
        """The texts' vectors, as TorchBert.encode gives them there. The request is sent before the model's
        load is awaited: one waiting there is served before the process's idle warm-up."""
        return self._ask({"op": "encode", "texts": list(texts), "batch_size": batch_size, "normalize": normalize})

    def layer_states(self, input_ids: np.ndarray, attention_mask: np.ndarray, layer: int) -> np.ndarray:
        """One layer of TorchBert.hidden_states there for a padded batch (int64 ids and mask), float32."""
        pair = np.ascontiguousarray(np.stack([input_ids, attention_mask]), dtype=np.int64)
        return self._ask(
            {"op": "layer", "shape": list(input_ids.shape), "layer": int(layer)}, memoryview(pair).cast("B")
        )

    def _ask(self, request: dict, payload: bytes | memoryview = b"") -> np.ndarray:
        with self._lock:
            if self.failure is not None:
                raise self.failure
            try:
                try:
                    send(self._socket, request, payload)
                except OSError as e:  # the other process has gone
                    self._ended(f": {e}")
                self._ready()
                header, payload = self._answer()
            except BaseException:  # an interrupt (or the process gone) halfway through a request
                self.broken = self.failure is None
                raise
        if not header.get("ok"):
            raise RuntimeError(f"the embedder's process could not answer {request['op']!r}: {header['error']}")
        return np.frombuffer(payload, dtype=np.float32).reshape(header["shape"])

    def _answer(self) -> tuple[dict, bytearray]:
        try:
            answer = receive(self._socket)
        except OSError as e:
            self._ended(f": {e}")
        if answer is None:
            self._ended("")
        return answer

    def _ended(self, why: str) -> NoReturn:
        code = self._process.wait(timeout=30)
        raise RuntimeError(
            f"the embedder's process ({sys.executable} -m raglake.embed.serve) ended without an answer "
            f"(exit code {code}){why}; its error, if any, is above on stderr. Set {SWITCH}=0 to load the "
            "model in this process instead."
        )

    def close(self) -> None:
        """Close this end (the other process then exits) and reap it; killed if it has not gone in 10 s,
        or at once while its model is still loading (nothing to finish there)."""
        if self._hello is None:
            self.kill()
            return
        self._forget()
        self._socket.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()

    def kill(self) -> None:
        """Stop it now (an early start no run took: it may be inside torch's import)."""
        self._forget()
        self._socket.close()
        self._process.kill()
        self._process.wait()

    def _forget(self) -> None:
        with _registry_lock:
            _live.get(str(self.folder), set()).discard(self)


class RemoteBert:
    """The model of a ModelProcess behind the part of a SentenceTransformer's interface that a run's
    vectors need (`encode`, `tokenizer`, `max_seq_length`, `get_embedding_dimension`); the tokenizer runs
    here (`tokenizers`, no torch)."""

    remote = True

    def __init__(self, folder: Path):
        self.process = _adopt(folder) or ModelProcess(folder)
        shape = BertShape(folder)
        self.num_layers, self.hidden_size = shape.num_layers, shape.hidden_size
        self.max_seq_length = shape.max_seq_length
        self.tokenizer = BertTokenizer(folder, self.max_seq_length)  # the model's own load is not awaited here:
        # the first request goes before it ends, so that the process serves it before its idle warm-up

    def get_embedding_dimension(self) -> int:
        return self.hidden_size

    def current(self) -> ModelProcess:
        """The process to ask: a fresh one in a fork of the process that started it (the socket and its lock
        are that process's), or after a request cut off halfway (the old one is stopped)."""
        if self.process.owner != os.getpid():
            self.process = ModelProcess(self.process.folder)
        elif self.process.broken:
            self.process.kill()
            self.process = ModelProcess(self.process.folder)
        return self.process

    def layer_states(self, input_ids: np.ndarray, attention_mask: np.ndarray, layer: int) -> np.ndarray:
        return self.current().layer_states(input_ids, attention_mask, layer)

    def encode(
        self, texts: Sequence[str], batch_size: int = 32, normalize_embeddings: bool = False, **display: bool
    ) -> np.ndarray:
        """As TorchBert.encode (`display`: convert_to_numpy, show_progress_bar: always numpy, never a bar)."""
        if not texts:
            return np.zeros((0, self.hidden_size), dtype=np.float32)
        return self.current().encode(texts, batch_size, normalize_embeddings)


_registry_lock = threading.RLock()
_live: dict[str, set[ModelProcess]] = {}  # folder -> its processes not yet closed (started early or in use)
_early: dict[str, ModelProcess] = {}  # folder -> the one start_early began that no RemoteBert took yet


def start_early(folder: Path) -> None:
    """Start the model's process for `folder` now, before a run has said it will embed; the first
    RemoteBert of the folder adopts it. Nothing happens where the model would not load in a process, or
    where one of that folder runs already (a later call of a live session uses the loaded one)."""
    if not wanted():
        return
    with _registry_lock:
        if not _live.get(str(folder)):
            _early[str(folder)] = ModelProcess(folder)


def _adopt(folder: Path) -> ModelProcess | None:
    with _registry_lock:
        return _early.pop(str(folder), None)


@atexit.register
def _close_all() -> None:
    """At exit: every process this one started ends (they would on their own once the socket closes; this
    reaps them, so that nothing outlives the caller even briefly)."""
    with _registry_lock:
        left = [p for group in _live.values() for p in group if p.owner == os.getpid()]
    for process in left:
        process.close()


def discard_early() -> None:
    """Stop the processes start_early began that no run took."""
    with _registry_lock:
        left = list(_early.values())
        _early.clear()
    for process in left:
        process.kill()
