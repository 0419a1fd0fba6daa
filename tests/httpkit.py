"""Helpers of the http target tests: the demo service started in-process on a free loopback port with
sticky fault injection, its config, and what each injected fault should produce."""

import shutil
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from raglake.schemas import GoldenCase
from tests.conftest import ROOT

SAMPLE_GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
DEMO_CONFIG = ROOT / "data" / "targets" / "demo.yaml"
# a few notes of data/corpus (the big incident log left out so the index builds in seconds), plus the
# files the indexer must skip or find empty, so the manifest has something in every column
CORPUS_SUBSET = (
    "work/projects/atlas.md",
    "work/projects/atlas-architecture.md",
    "work/projects/beacon.md",
    "work/decisions/adr-012-event-bus.md",
    "work/decisions/adr-015-cache-ttl.md",
    "work/meetings/2024-03-04-atlas-steering.md",
    "personal/recipes/sourdough.md",
    "personal/travel/japan-2024.md",
    "personal/inbox/empty.md",
    "work/drafts/frontmatter-only.md",
    "work/reference/oncall-phone-tree.txt",
)
STATUS_OF_FAULT = {None: "ok", "error": "error", "malformed": "error", "timeout": "timeout", "empty": "empty"}
# sticky faults drawn per question (the Faults are given no questions: each question by chance; on the
# 66-question sample, seed 6: 7 errors, 4 timeouts, 8 empty, 4 malformed, 13 flaky)
FAULTS = dict(error_rate=0.1, timeout_rate=0.05, empty_rate=0.1, malformed_rate=0.05, flaky_rate=0.2, seed=6)
TIMEOUT_S = 2.0  # the client's; a sticky "timeout" question hangs HANG_S on the server
HANG_S = 4.0
FLOW_METRICS = ["recall_any_at_k", "mrr_at_k", "abstention_accuracy"]


# ---- the demo service, in-process ----------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def small_corpus(dest: Path) -> Path:
    for rel in CORPUS_SUBSET:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / "data" / "corpus" / rel, dest / rel)
    return dest


@dataclass
class Demo:
    """The demo app served by uvicorn in a background thread; `log` holds (method, path,
    Authorization header) for every request the app received."""

    target: Any
    faults: Any
    app: Any
    port: int
    server: Any
    thread: threading.Thread
    log: list[tuple[str, str, str | None]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> Counter:
        return self.app.state.requests

    def reset(self) -> None:
        """Forget every request (the sticky faults stay; flaky questions fail their next first attempt)."""
        self.app.state.requests.clear()
        self.log.clear()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


def start_demo(corpus: Path, lake_url: str, faults: Any, warm: list[str] = ()) -> Demo:
    """Index `corpus`, encode the `warm` questions once (so requests hit the demo's vector cache and
    stay fast on a loaded machine), then serve the app on a free loopback port."""
    import uvicorn

    from raglake.demo.app import create_app
    from raglake.targets.builtin import BuiltinTarget

    target = BuiltinTarget(str(corpus), lake_url, None)
    target.manifest()
    if warm:
        target.capture([GoldenCase(id=f"warm-{i}", question=q) for i, q in enumerate(dict.fromkeys(warm))])
    app = create_app(target, faults)
    log: list[tuple[str, str, str | None]] = []

    @app.middleware("http")
    async def record(request, call_next):  # noqa: ANN001, ANN202
        log.append((request.method, request.url.path, request.headers.get("authorization")))
        return await call_next(request)

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, name=f"demo-{port}", daemon=True)
    thread.start()
    demo = Demo(target, faults, app, port, server, thread, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(demo.url("/healthz"), timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the demo did not come up on port {port}")
        time.sleep(0.05)
    log.clear()
    return demo


def write_config(path: Path, port: int, **overrides: Any) -> Path:
    """data/targets/demo.yaml pointed at `port`, with some fields changed."""
    config = yaml.safe_load(DEMO_CONFIG.read_text())
    config["url"] = f"http://127.0.0.1:{port}/debug/query"
    config["manifest_url"] = f"http://127.0.0.1:{port}/debug/index"
    config.update(overrides)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def expected_status(faults: Any, question: str) -> str:
    return STATUS_OF_FAULT[faults.fault_for(question)]


def is_flaky(faults: Any, question: str) -> bool:
    return faults.is_flaky(question)


def expected_attempts(faults: Any, question: str, retries: int) -> int:
    """Sticky 500s and hangs use every retry; a flaky question's first 503 costs one more attempt;
    nothing else is retried (a malformed body is not a transient failure)."""
    if faults.fault_for(question) in ("error", "timeout"):
        return retries + 1
    return 2 if is_flaky(faults, question) else 1
