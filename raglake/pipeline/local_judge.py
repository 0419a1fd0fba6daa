"""The bundled local judge (`judge: local`): llama.cpp's server started for the runs that ask for it and stopped
after them. The one place where it is set up, for the command line, the Python API and metaeval alike."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from raglake.judge.local import LocalJudgeServer
from raglake.pipeline.settings import JudgeSettings

LOCAL_TIMEOUT_S = 600.0  # llama.cpp on a CPU answers one request at a time: a queued call waits its turn
STARTING = "starting the local judge (llama.cpp, SmolLM2-135M: weak, for a fully offline pipeline) …"


@contextlib.contextmanager
def local_judge(
    judge: JudgeSettings | None,
    announce: Callable[[str], None] | None = None,
    on_stop: Callable[[Callable[[], None]], contextlib.AbstractContextManager] | None = None,
) -> Iterator[JudgeSettings | None]:
    """The judge to use: a remote one as given, or (judge.local) the local server's, started now (unless a caller
    started it: it has an address) and stopped when the block ends. `on_stop(stop)`: a context that also calls
    `stop` on an interruption (the CLI's)."""
    if judge is None or not judge.local or judge.base_url:  # a remote judge, or the local one already started
        yield judge
        return
    if announce is not None:
        announce(STARTING)
    server = LocalJudgeServer()
    with on_stop(server.stop) if on_stop is not None else contextlib.nullcontext(), server:
        # one request at a time on this CPU: queueing more only times them out
        yield judge.model_copy(
            update=dict(base_url=server.base_url, concurrency=1, timeout_s=max(judge.timeout_s, LOCAL_TIMEOUT_S))
        )
