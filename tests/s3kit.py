"""A real S3 API on loopback for the tests and benchmarks: moto's server mode in a subprocess (`python -m
moto.server`), a fault proxy in front of it (answers 503 SlowDown or 500 InternalError for a share of
requests, counts requests and the bytes sent, and can call a hook on a request), and the environment
that points s3fs (botocore) at either one.

    with MotoServer() as moto, FaultProxy(moto.url) as proxy:
        make_bucket(moto.url, "lake")
        env = s3_env(proxy.url)          # for a subprocess; in this process: use_endpoint(monkeypatch, url)
"""

from __future__ import annotations

import http.client
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
_SLOWDOWN = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
_INTERNAL = b"<Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>"
_NOT_IMPLEMENTED = b"<Error><Code>NotImplemented</Code><Message>If-None-Match is not implemented</Message></Error>"
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "server", "date"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    """Until something listens on 127.0.0.1:`port` (a RuntimeError when `proc` exits first or time runs out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def stop(proc: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM the process (its whole group when it leads one), then SIGKILL what is left."""
    if proc.poll() is not None:
        return
    group = os.getpgid(proc.pid) == proc.pid
    os.killpg(proc.pid, signal.SIGTERM) if group else proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL) if group else proc.kill()
        proc.wait(timeout)


class MotoServer:
    """moto's S3 server in a subprocess on a free loopback port; stopped on exit."""

    def __init__(self, log: Path | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log

    def __enter__(self) -> MotoServer:
        out = open(self.log, "wb") if self.log else subprocess.DEVNULL  # noqa: SIM115 (closed in __exit__)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **KEYS},
            start_new_session=True,
        )
        self._out = out
        wait_for_port(self.port, self.proc)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self.proc)
        if self._out is not subprocess.DEVNULL:
            self._out.close()


def s3_env(endpoint: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process whose s3fs talks to `endpoint` (botocore reads AWS_ENDPOINT_URL)."""
    return {**(os.environ if base is None else base), **KEYS, "AWS_ENDPOINT_URL": endpoint}


def use_endpoint(monkeypatch: Any, endpoint: str, **extra: str) -> None:
    """Point this process's s3fs at `endpoint`: the environment, and no cached S3 filesystem (fsspec keeps
    one per set of arguments, with the endpoint it was made with)."""
    from s3fs import S3FileSystem

    for key, value in {**KEYS, "AWS_ENDPOINT_URL": endpoint, **extra}.items():
        monkeypatch.setenv(key, value)
    S3FileSystem.clear_instance_cache()


def make_bucket(endpoint: str, *names: str) -> None:
    """Create buckets straight on the server (no fault proxy in between)."""
    for name in names:
        conn = http.client.HTTPConnection(urllib.parse.urlsplit(endpoint).netloc, timeout=30)
        conn.request("PUT", f"/{name}", headers={"Content-Length": "0"})
        response = conn.getresponse()
        response.read()
        conn.close()
        if response.status not in (200, 409):
            raise RuntimeError(f"cannot create bucket {name}: HTTP {response.status}")


def list_keys(endpoint: str, bucket: str, prefix: str = "") -> list[str]:
    """Every key under `prefix` in `bucket`, listed straight on the server (boto3, no cache, no proxy)."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, **_boto_keys())
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return sorted(keys)


def multipart_uploads(endpoint: str, bucket: str) -> list[str]:
    """Keys of multipart uploads begun and neither completed nor aborted."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint, **_boto_keys())
    return sorted(u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", []))


def _boto_keys() -> dict[str, str]:
    return {
        "aws_access_key_id": KEYS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": KEYS["AWS_SECRET_ACCESS_KEY"],
        "region_name": KEYS["AWS_DEFAULT_REGION"],
    }


def operation(method: str, path: str, query: str) -> str:
    """The S3 operation of a request, roughly: what the counters are keyed by."""
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    if method == "PUT":
        return "UploadPart" if "partNumber" in q else "PutObject"
    if method == "POST":
        return "CompleteMultipartUpload" if "uploadId" in q else "CreateMultipartUpload" if "uploads" in q else "Post"
    if method == "GET":
        return "ListObjects" if path.count("/") <= 1 or "list-type" in q else "GetObject"
    return {"HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(method, method)


class FaultProxy:
    """An HTTP proxy on a free loopback port in front of `upstream`. A share `faults` of requests (those
    `only(method, path)` selects) is answered 503 SlowDown or 500 InternalError without reaching the
    server, at most `max_run` times in a row for one request (method, path and query), so that the S3
    client's own retries (botocore: 5 attempts) always get through; `max_run=None`: no cap.
    `hook(method, path, query)` (the path decoded) runs before each request is forwarded (a true result
    drops it); where `lose_answer(method, path, query)` says so, a request is done on the server but
    answered 500 (an answer lost on the way). Counts every request by operation, the bytes of the bodies
    sent, the server's answers by status and the faults answered."""

    def __init__(
        self,
        upstream: str,
        *,
        faults: float = 0.0,
        max_run: int | None = 3,
        seed: int = 0,
        only: Callable[[str, str], bool] | None = None,
    ):
        self.upstream = urllib.parse.urlsplit(upstream).netloc
        self.faults, self.max_run, self.only = faults, max_run, only
        self.hook: Callable[[str, str, str], bool | None] | None = None
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.sent_bytes = 0
        self.statuses: Counter[int] = Counter()
        self.by_folder: Counter[str] = Counter()  # requests by the bucket's top folder
        self.sent_by_folder: Counter[str] = Counter()  # bytes sent by the bucket's top folder
        self.lose_answer: Callable[[str, str, str], bool] | None = None
        self.no_conditional = False  # answer a request with If-None-Match 501 NotImplemented (an older store)
        self._runs: Counter[str] = Counter()

    def __enter__(self) -> FaultProxy:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.injected.clear()
            self.statuses.clear()
            self.by_folder.clear()
            self.sent_by_folder.clear()
            self.sent_bytes = 0

    def fault(self, method: str, path: str, query: str) -> bytes | None:
        """The error body to answer instead of forwarding, or None."""
        if not self.faults or (self.only is not None and not self.only(method, path)):
            return None
        key = f"{method} {path}?{query}"
        with self.lock:
            if self.random.random() >= self.faults or (self.max_run is not None and self._runs[key] >= self.max_run):
                self._runs[key] = 0
                return None
            self._runs[key] += 1
            body = _SLOWDOWN if self.random.random() < 0.5 else _INTERNAL
            self.injected["503" if body is _SLOWDOWN else "500"] += 1
            return body

    def count(self, method: str, path: str, query: str, size: int, copy: bool) -> None:
        top = (path.split("/") + ["", ""])[2]  # /bucket/TOP/…: the lake's or the results location's folder
        with self.lock:
            self.requests["CopyObject" if copy else operation(method, path, query)] += 1
            self.by_folder[top] += 1
            self.sent_bytes += size
            self.sent_by_folder[top] += size

    def answered(self, status: int) -> None:
        with self.lock:
            self.statuses[status] += 1


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            return

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                data = b""
                while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                    data += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
                return data
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes, head: bool) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            if not head or not any(n.lower() == "content-length" for n, _ in headers):
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _forward(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            method, body, path = self.command, self._body(), urllib.parse.unquote(url.path)  # `=` comes as %3D
            if proxy.hook is not None and proxy.hook(method, path, url.query):
                self.close_connection = True  # dropped: never forwarded, never answered
                return
            if proxy.no_conditional and "If-None-Match" in self.headers:
                self._answer(501, [("Content-Type", "application/xml")], _NOT_IMPLEMENTED, method == "HEAD")
                return
            error = proxy.fault(method, path, url.query)
            if error is not None:
                status = 503 if error is _SLOWDOWN else 500
                self._answer(status, [("Content-Type", "application/xml")], error, method == "HEAD")
                return
            proxy.count(method, path, url.query, len(body), "x-amz-copy-source" in self.headers)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
            headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection(proxy.upstream, timeout=120)
            try:
                conn.request(method, self.path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                proxy.answered(response.status)
                if proxy.lose_answer is not None and proxy.lose_answer(method, path, url.query):
                    self._answer(500, [("Content-Type", "application/xml")], _INTERNAL, method == "HEAD")
                    return  # done on the server, but the client hears a failure (a lost answer)
                kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
                if method == "HEAD" and response.getheader("Content-Length") is not None:
                    kept.append(("Content-Length", response.getheader("Content-Length")))
                self._answer(response.status, kept, data, method == "HEAD")
            finally:
                conn.close()

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

    return Handler
