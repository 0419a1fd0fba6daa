"""The limits of the HTTP edges (the judge gateway, the http target): a response body is decoded here
(gzip, deflate) and read only up to a cap counted after decompression, so a gzip bomb or an endless body
stops at the cap instead of filling memory, then has the request's secrets redacted (raglake.redact);
the client never follows a redirect (the caller says which it was); the callers bound each whole attempt
(connect, headers and body) with one deadline."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Iterator

import httpx

from raglake.redact import NOTHING, Redactor

TARGET_MAX_RESPONSE_BYTES = 32 * 2**20  # an http target's default `max_response_bytes`
JUDGE_MAX_RESPONSE_BYTES = 8 * 2**20  # a judge's reply: a chat completion of a few thousand tokens at most
ACCEPT_ENCODING = "gzip, deflate"  # what this module decodes (and so what the client asks for)
_PIECE = 1 << 16  # bytes of decoded output per step: memory stays bounded whatever the compression ratio


class ResponseTooLarge(Exception):
    """The body went past the cap (after decompression); reading stopped there."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"the response exceeded {limit} bytes (after decompression); reading stopped there")


class _Coding:
    """One content-coding's decoder, fed a chunk at a time, giving its output in bounded pieces; gzip
    members one after another are one body (RFC 1952), deflate may be zlib-wrapped or raw."""

    def __init__(self, name: str):
        if name in ("gzip", "x-gzip"):
            self.wbits = 16 + zlib.MAX_WBITS
        elif name == "deflate":
            self.wbits = zlib.MAX_WBITS
        else:
            raise httpx.DecodingError(f"the response's content-encoding {name!r} is not supported ({ACCEPT_ENCODING})")
        self.name, self.started = name, False
        self.d = zlib.decompressobj(self.wbits)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                out = self.d.decompress(data, _PIECE)
            except zlib.error as e:
                if self.name == "deflate" and not self.started and self.wbits > 0:  # raw deflate, no zlib header
                    self.wbits, self.d = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise httpx.DecodingError(f"the response is not valid {self.name}: {e}") from None
            self.started = True
            if out:
                yield out
            if self.d.eof:  # the end of a gzip member: another may follow
                data = self.d.unused_data
                if data and self.wbits > 16:
                    self.d = zlib.decompressobj(self.wbits)
                    continue
                return
            data = self.d.unconsumed_tail

    def flush(self) -> bytes:
        return self.d.flush()


def _through(codings: list[_Coding], data: bytes) -> Iterator[bytes]:
    if not codings:
        if data:
            yield data
        return
    for piece in codings[0].feed(data):
        yield from _through(codings[1:], piece)


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, raw: httpx.AsyncByteStream, codings: list[str], limit: int, redact: Redactor):
        self.raw, self.codings, self.limit, self.redact = raw, codings, limit, redact

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if not self.redact:
            async for piece in self._decoded():
                yield piece
            return
        # a secret may straddle two pieces: the body (capped) is redacted whole
        yield self.redact.body(b"".join([piece async for piece in self._decoded()]))

    async def _decoded(self) -> AsyncIterator[bytes]:
        codings = [_Coding(name) for name in reversed(self.codings)]  # the last applied is undone first
        total = 0

        def counted(pieces: Iterator[bytes]) -> Iterator[bytes]:
            nonlocal total
            for piece in pieces:
                total += len(piece)
                if total > self.limit:
                    raise ResponseTooLarge(self.limit)
                yield piece

        async for chunk in self.raw:
            for piece in counted(_through(codings, chunk)):
                yield piece
        for i, coding in enumerate(codings):
            for piece in counted(_through(codings[i + 1 :], coding.flush())):
                yield piece

    async def aclose(self) -> None:
        await self.raw.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, its response bodies decoded here, capped at `limit` bytes and, with `redact`,
    without the request's secrets (a server echoing a key back: nothing past here sees it)."""

    def __init__(self, limit: int, limits: httpx.Limits | None = None, redact: Redactor = NOTHING):
        self.limit, self.redact = limit, redact
        self._inner = httpx.AsyncHTTPTransport(limits=limits or httpx.Limits())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
        codings = [c for c in codings if c and c != "identity"]
        headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"content-encoding", b"content-length")]
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=_CappedStream(response.stream, codings, self.limit, self.redact),  # type: ignore[arg-type]
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(limit: int, limits: httpx.Limits | None = None, redact: Redactor = NOTHING) -> httpx.AsyncClient:
    """An async client whose response bodies stop at `limit` bytes (decoded), lose the secrets `redact`
    knows, and that follows no redirect."""
    return httpx.AsyncClient(
        transport=CappedTransport(limit, limits, redact),
        follow_redirects=False,
        headers={"Accept-Encoding": ACCEPT_ENCODING},
    )


def redirect_message(status: int, location: str | None) -> str:
    """What a 3xx is recorded as: redirects are never followed."""
    where = f"redirect to {location[:300]}" if location else "a redirect without a Location"
    return f"the server answered {status} ({where}, not followed)"
