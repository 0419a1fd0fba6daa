"""A loopback OpenAI-compatible chat server for the judge tests and benchmarks/judge.py.

It speaks real HTTP (`POST /v1/chat/completions`, `GET /v1/models`) on 127.0.0.1 and is scripted per
test: a queue of `Reply` objects is served first (one per request, in order), then `handler(body)`
answers, else every prompt gets a valid canned answer (tests/judgekit.canned, shaped to the request:
one verdict per numbered chunk or claim). It counts requests and records each one (body, headers,
arrival time). `GET /_stats` gives the count as JSON, for a server in another process.

    with FakeOpenAI() as server:                # a thread of this process
        server.script(error(429, "slow down", {"Retry-After": "1"}), ok({"score": 4, ...}))
        JudgeConfig(base_url=server.url, ...)

    python tests/fake_openai.py --port 8100 --latency-ms 200     # a separate process (benchmarks)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests.judgekit` and `raglake` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass
class Reply:
    """One scripted answer: a chat completion (status 200) or an HTTP error."""

    content: str | None = None
    status: int = 200
    finish_reason: str = "stop"
    prompt_tokens: int | None = 120
    completion_tokens: int | None = 30
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    error: str = "error"
    model: str | None = None  # the reply's `model` (None: the server's reply_model, else the request's)
    system_fingerprint: str | None = None  # None: the server's fingerprint (none by default)


def ok(output: dict[str, Any] | str, **kw: Any) -> Reply:
    """A completion whose message content is `output` (a dict is sent as JSON text)."""
    return Reply(content=output if isinstance(output, str) else json.dumps(output), **kw)


def error(status: int, message: str, headers: dict[str, str] | None = None, **kw: Any) -> Reply:
    return Reply(status=status, error=message, headers=headers or {}, prompt_tokens=None, completion_tokens=None, **kw)


def hang(seconds: float) -> Reply:
    """No reply for `seconds` (then a valid-looking one, which a client with a shorter timeout never reads)."""
    return Reply(content='{"late": true}', delay_s=seconds)


@dataclass
class Seen:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float  # time.monotonic() on arrival

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def prompt_id(self) -> str | None:
        return prompt_id_of(self.body)


def prompt_id_of(body: dict[str, Any]) -> str | None:
    """The raglake prompt a request renders: the json_schema name, else the system message's prompt."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["name"]
    system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
    from raglake.judge.prompts import load_prompts

    for pid, prompt in load_prompts().items():
        if system.startswith(prompt.system.strip()):
            return pid
    return None


def canned_reply(body: dict[str, Any]) -> Reply:
    """A valid answer to whichever raglake prompt the request renders."""
    from tests.judgekit import canned

    pid = prompt_id_of(body)
    user = next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")
    if pid is None:
        return error(400, "fake server: cannot tell which prompt this is")
    # canned() counts "[n] " chunk lines and "n. " item lines: give it the whole user message
    return ok(canned(pid, {"contexts": user, "claims": user}))


class FakeOpenAI:
    """The loopback server. `latency_s` is added to every request (benchmarks)."""

    def __init__(
        self,
        latency_s: float = 0.0,
        handler: Callable[[dict[str, Any]], Reply] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        self.latency_s, self.handler, self.host = latency_s, handler, host
        # what the replies' envelopes say served them (a provider swapping the model behind a name)
        self.reply_model: str | None = None
        self.fingerprint: str | None = None
        self._queue: collections.deque[Reply] = collections.deque()
        self.requests: list[Seen] = []
        self._count = 0
        self._lock = threading.Lock()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
        self._sock.bind((host, port))
        self.port = self._sock.getsockname()[1]
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def count(self) -> int:
        return self._count

    def script(self, *replies: Reply) -> FakeOpenAI:
        self._queue.extend(replies)
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self._count = 0

    # ---- the ASGI app ----------------------------------------------------------------------

    def _next(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return (self.handler or canned_reply)(body)

    async def __call__(self, scope: dict[str, Any], receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["path"]
        if scope["method"] == "GET" and path == "/_stats":
            return await _send(send, 200, {"requests": self._count})
        if scope["method"] == "GET" and path.endswith("/models"):
            return await _send(send, 200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        if not path.endswith("/chat/completions"):
            return await _send(send, 404, {"error": {"message": f"no route {path}"}})
        body = json.loads(raw or b"{}")
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        with self._lock:
            self._count += 1
            self.requests.append(Seen(body, headers, time.monotonic()))
        reply = self._next(body)
        delay = reply.delay_s + self.latency_s
        if delay:
            await asyncio.sleep(delay)
        if reply.status != 200:
            err = {
                "error": {
                    "message": reply.error,
                    "type": "invalid_request_error" if reply.status < 500 else "server_error",
                }
            }
            return await _send(send, reply.status, err, reply.headers)
        served = dict(model=reply.model or self.reply_model, fingerprint=reply.system_fingerprint or self.fingerprint)
        await _send(send, 200, completion(reply, body, self._count, **served), reply.headers)

    # ---- running it ------------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        import uvicorn

        config = uvicorn.Config(
            self,
            log_level="error",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=1,
            interface="asgi3",
            backlog=512,
            timeout_keep_alive=30,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="fake-openai"
        )
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def completion(
    reply: Reply, body: dict[str, Any], n: int = 1, model: str | None = None, fingerprint: str | None = None
) -> dict[str, Any]:
    """The chat completion object (the JSON envelope) that carries a 200 `reply` to the request `body`:
    `model` as the request named it unless `model` says otherwise, a `system_fingerprint` when given."""
    out: dict[str, Any] = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or reply.model or body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "finish_reason": reply.finish_reason,
                "message": {"role": "assistant", "content": reply.content},
            }
        ],
    }
    if fingerprint or reply.system_fingerprint:
        out["system_fingerprint"] = fingerprint or reply.system_fingerprint
    if reply.prompt_tokens is not None:
        out["usage"] = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + (reply.completion_tokens or 0),
        }
    return out


async def _send(send: Callable, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    data = json.dumps(payload).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    head += [(k.lower().encode(), str(v).encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": data})


def user_message(seen: Seen) -> str:
    return next(m["content"] for m in seen.messages if m["role"] == "user")


def data_fences(text: str) -> dict[str, str]:
    """name -> fenced content of every <data name="…"> block."""
    return {m.group(1): m.group(2) for m in re.finditer(r'<data name="(\w+)">\n(.*?)\n</data>', text, re.DOTALL)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    server = FakeOpenAI(latency_s=args.latency_ms / 1000, port=args.port)
    print(server.url, flush=True)  # the parent reads the URL from the first line
    import uvicorn

    uvicorn.Server(
        uvicorn.Config(
            server,
            log_level="error",
            lifespan="off",
            access_log=False,
            backlog=2048,
            interface="asgi3",
            timeout_keep_alive=30,
        )
    ).run(sockets=[server._sock])


if __name__ == "__main__":
    main()
