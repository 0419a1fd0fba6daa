"""`python -m raglake.embed.serve FD FOLDER`: the model process of raglake.embed.process. Loads FOLDER's
model with raglake.embed.torchbert, says so on the socket FD (its figures, or the load's error), then
encodes what it is asked, one request at a time, until the other end closes; it then leaves at once
(os._exit: nothing to flush, and torch's teardown is ~0.3 s of nobody's time). While nothing is asked, it
warms the model up once (the first encode of a process is about a third slower)."""

from __future__ import annotations

import os
import select
import socket
import sys
from pathlib import Path

import numpy as np
import torch

from raglake.embed.model import WARM_UP_TEXTS
from raglake.embed.process import receive, send
from raglake.embed.torchbert import TorchBert

IDLE_S = 0.05  # a request arriving this soon after the load is served before the warm-up


def serve(sock: socket.socket, folder: Path) -> None:
    try:
        model = TorchBert(folder)
    except (OSError, ValueError) as e:  # what the same load in the caller's process turns into a ConfigError
        send(sock, {"ok": False, "error": str(e)})
        return
    send(sock, {"ok": True, "dimension": model.hidden_size, "threads": torch.get_num_threads()})
    if not select.select([sock], [], [], IDLE_S)[0]:  # nothing asked yet: warm up while the caller is busy
        model.encode(WARM_UP_TEXTS, batch_size=64)
    while (request := receive(sock)) is not None:
        try:
            out = np.ascontiguousarray(answer(model, *request), dtype=np.float32)
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:  # torch's, or a malformed request
            send(sock, {"ok": False, "error": f"{type(e).__name__}: {e}"})
            continue
        send(sock, {"ok": True, "shape": list(out.shape)}, memoryview(out).cast("B"))


def answer(model: TorchBert, header: dict, payload: bytearray) -> np.ndarray:
    """What a request asks: `encode` (texts -> vectors) or `layer` (a padded batch's ids and mask -> one
    hidden layer's states, as BERTScore reads them)."""
    if header["op"] == "encode":
        texts, size, normalize = header["texts"], int(header["batch_size"]), bool(header["normalize"])
        return model.encode(texts, batch_size=size, normalize_embeddings=normalize)
    if header["op"] == "layer":
        ids, mask = torch.from_numpy(np.frombuffer(payload, dtype=np.int64).reshape(2, *header["shape"]).copy())
        return model.hidden_states(ids, mask)[int(header["layer"])].float().numpy()
    raise ValueError(f"unknown request {header['op']!r}")


def main(argv: list[str]) -> None:
    fd, folder = argv
    with socket.socket(fileno=int(fd)) as sock:
        try:
            serve(sock, Path(folder))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the caller has gone: nobody to answer
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
