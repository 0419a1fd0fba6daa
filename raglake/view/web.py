"""`raglake view`'s web app: Starlette routes over the lake's pages, rendered on the server by Jinja2
(autoescaped: every value from the lake is text, never markup) with the package's own stylesheet. No
script runs on any page (the Content-Security-Policy forbids one), nothing is fetched from elsewhere, and
every route only reads: run, case and call ids are looked up as SQL parameters, never as paths."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import raglake
from raglake.errors import RaglakeError
from raglake.report.charts import arrow
from raglake.report.format import interval, pvalue, reason_text, slice_label
from raglake.report.html import coverage_value, figure_value, num, pretty_json
from raglake.view import pages
from raglake.view.lakewide import SqlLimits
from raglake.view.state import LakeState

# no script, no plugin, no frame; styles and images from this server only (inline SVG needs no fetch)
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def run_url(run_id: str) -> str:
    return f"/runs/{quote(run_id, safe='')}"


def case_url(run_id: str, case_id: str, against: str | None = None) -> str:
    tail = f"?{urlencode({'against': against})}" if against else ""
    return f"{run_url(run_id)}/cases/{quote(case_id, safe='')}{tail}"


def compare_url(a: str, b: str) -> str:
    return f"/compare?{urlencode({'a': a, 'b': b})}"


def call_url(call_key: str, run_id: str | None = None, case_id: str | None = None) -> str:
    tail = f"?{urlencode({'run': run_id, 'case': case_id})}" if run_id and case_id else ""
    return f"/calls/{quote(call_key, safe='')}{tail}"


def query_url(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("raglake.view", "templates"),
        autoescape=True,  # every template: the lake's texts are never markup
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        num=num, pvalue=pvalue, figure_value=figure_value, coverage_value=coverage_value, pretty_json=pretty_json
    )
    env.filters["reason"] = reason_text
    env.globals.update(
        arrow=arrow,
        interval=interval,
        slice_label=slice_label,
        run_url=run_url,
        case_url=case_url,
        compare_url=compare_url,
        call_url=call_url,
        query_url=query_url,
        version=getattr(raglake, "__version__", ""),
    )
    return env


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response (pages, errors, the stylesheet, CSV)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        async def with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


def allowed_hosts(host: str) -> list[str] | None:
    """Host names (lower case, IPv6 without brackets) the app answers: the loopback names when it listens on a
    loopback address, IPv4 or IPv6 (a page elsewhere cannot reach the lake through DNS rebinding); None (any)
    when it was bound to another address on purpose (--host)."""
    bare = host.strip("[]").lower()
    try:
        loopback = bare == "localhost" or ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False
    return [*LOOPBACK_NAMES, "::1", bare, "testserver"] if loopback else None


def host_name(header: str) -> str | None:
    """The name of a Host header without its port (`[::1]:8765` -> `::1`); None when it is not one."""
    if header.startswith("["):
        name, bracket, rest = header[1:].partition("]")
        return name.lower() if bracket and (rest == "" or re.fullmatch(r":\d+", rest)) else None
    name, _, port = header.partition(":")
    return name.lower() if name and (not port or port.isdigit()) else None


class HostCheck:
    """Answers only requests whose Host header names one of `allowed` (400 otherwise); Starlette's
    TrustedHostMiddleware splits `[::1]:8765` at its first colon, so it cannot hold an IPv6 listener."""

    def __init__(self, app: Any, allowed: list[str]):
        self.app, self.allowed = app, set(allowed)

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http":  # no websocket route: the router refuses those
            header = dict(scope.get("headers", [])).get(b"host", b"").decode("latin-1")
            if host_name(header) not in self.allowed:
                await PlainTextResponse("Invalid host header", status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(state: LakeState, limits: SqlLimits, host: str = "127.0.0.1") -> Starlette:
    """The app over `state`'s lake; `limits`: how the SQL page runs a query (raglake.cli.view hands in
    `raglake sql`'s runner and row limit); `host`: the address it listens on (see allowed_hosts)."""
    ctx = pages.Context(state, limits, environment())

    async def errors(request: Request, exc: Exception) -> Response:
        return pages.error_response(ctx, exc)

    allowed = allowed_hosts(host)
    return Starlette(
        routes=[Route(path, endpoint=h, methods=["GET", "HEAD"]) for path, h in pages.Pages(ctx).routes()],
        middleware=[
            Middleware(SecurityHeaders),
            *([Middleware(HostCheck, allowed=allowed)] if allowed is not None else []),
        ],
        exception_handlers={RaglakeError: errors, HTTPException: errors},
    )
