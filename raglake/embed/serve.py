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
    send(sock, {"ok": True, "dimension": model.hidden_size})
    if not select.select([sock], [], [], IDLE_S)[0]:  # nothing asked yet: warm up while the caller is busy
        model.encode(WARM_UP_TEXTS, batch_size=64)
    while (request := receive(sock)) is not None:
        header, _ = request
        try:
            texts, size, normalize = header["texts"], int(header["batch_size"]), bool(header["normalize"])
            vectors = np.ascontiguousarray(model.encode(texts, batch_size=size, normalize_embeddings=normalize))
        except (RuntimeError, ValueError, KeyError, TypeError) as e:  # torch's, or a malformed request
            send(sock, {"ok": False, "error": f"{type(e).__name__}: {e}"})
            continue
        send(sock, {"ok": True, "shape": list(vectors.shape)}, memoryview(vectors).cast("B"))


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
