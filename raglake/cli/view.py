"""`raglake view`: the lake in a browser (raglake.view), read-only, on the loopback interface unless
--host names another address."""

from __future__ import annotations

import socket
from typing import Annotated

import typer

from raglake.cli import render, sql_run
from raglake.cli.common import LakeOpt, app
from raglake.errors import ConfigError

LOOPBACK = "127.0.0.1"
OPEN_WARNING = (
    "warning: listening on {host}, not on the loopback interface: anyone who can reach this address can read "
    "the whole lake (its answers, prompts and judge replies) and query it. The view has no login; use --host "
    "only on a network you trust."
)


def is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port (port 0: a free one, which the printed address names)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e} (try another --port)") from None
    return sock


@app.command()
def view(
    lake: LakeOpt = None,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")] = 8777,
    host: Annotated[
        str,
        typer.Option("--host", help="Address to listen on (default: loopback only; another one prints a warning)."),
    ] = LOOPBACK,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Stop a query of the SQL page after this many seconds (0: never)."),
    ] = 30,
) -> None:
    """A read-only web app over the lake: runs, a run, comparisons, cases, judge calls, metrics,
    meta-evaluations and a SQL box (docs/view.md). Stop it with Ctrl-C."""
    import uvicorn  # the web server and the app (Starlette, Jinja2): only for this command

    from raglake.view import web

    state = web.LakeState(lake)
    state.check()
    limits = web.SqlLimits(sql_run.run_stoppable, sql_run.TABLE_ROWS, timeout)
    if not is_loopback(host):
        render.console.print(OPEN_WARNING.format(host=host), style="bold yellow", highlight=False, soft_wrap=True)
    sock = listen(host, port)
    server = uvicorn.Server(uvicorn.Config(web.create_app(state, limits, host), log_level="warning"))
    shown = f"[{host}]" if ":" in host else host
    render.console.print(
        f"raglake view of {state.url} on http://{shown}:{sock.getsockname()[1]}/ (read-only; Ctrl-C stops it)",
        highlight=False,
        soft_wrap=True,
    )
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        state.close()
