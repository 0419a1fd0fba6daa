"""The limits of the HTTP edges (the judge gateway, the http target): a response body is decoded here
(gzip, deflate) and read only up to a cap counted after decompression, so a gzip bomb or an endless body
stops at the cap instead of filling memory, then has the request's secrets redacted (raglake.redact);
the client never follows a redirect (the caller says which it was); the callers bound each whole attempt
(connect, headers and body) with one deadline."""

from __future__ import annotations

import functools
import zlib
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

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

    def __init__(self, name: str, decoding_error: type[Exception]):
        self.decoding_error = decoding_error
        if name in ("gzip", "x-gzip"):
            self.wbits = 16 + zlib.MAX_WBITS
        elif name == "deflate":
            self.wbits = zlib.MAX_WBITS
        else:
            raise decoding_error(f"the response's content-encoding {name!r} is not supported ({ACCEPT_ENCODING})")
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
                raise self.decoding_error(f"the response is not valid {self.name}: {e}") from None
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


@functools.cache
def _stream_class(http: ModuleType) -> type:
    """A response body of one HTTP module (httpx or httpx2), decoded, capped and redacted."""

    class CappedStream(http.AsyncByteStream):
        def __init__(self, raw: Any, codings: list[str], limit: int, redact: Redactor):
            self.raw, self.codings, self.limit, self.redact = raw, codings, limit, redact

        async def __aiter__(self) -> AsyncIterator[bytes]:
            if not self.redact:
                async for piece in self._decoded():
                    yield piece
                return
            # a secret may straddle two pieces: the body (capped) is redacted whole
            yield self.redact.body(b"".join([piece async for piece in self._decoded()]))

        async def _decoded(self) -> AsyncIterator[bytes]:
            codings = [_Coding(name, http.DecodingError) for name in reversed(self.codings)]  # last applied first
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

    return CappedStream


@functools.cache
def _transport_class(http: ModuleType) -> type:
    """The capped transport for one HTTP module: httpx (the http target) or httpx2 (the module the openai
    SDK is built on: the judge's client; through legacy httpx the SDK spent twice the CPU per call)."""
    capped_stream = _stream_class(http)

    class CappedTransport(http.AsyncBaseTransport):
        """The module's transport, its response bodies decoded here, capped at `limit` bytes and, with
        `redact`, without the request's secrets (a server echoing a key back: nothing past here sees it)."""

        def __init__(self, limit: int, limits: Any, redact: Redactor):
            self.limit, self.redact = limit, redact
            self._inner = http.AsyncHTTPTransport(limits=limits or http.Limits())

        async def handle_async_request(self, request: Any) -> Any:
            response = await self._inner.handle_async_request(request)
            codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
            codings = [c for c in codings if c and c != "identity"]
            dropped = (b"content-encoding", b"content-length")
            return http.Response(
                response.status_code,
                headers=[(k, v) for k, v in response.headers.raw if k.lower() not in dropped],
                stream=capped_stream(response.stream, codings, self.limit, self.redact),
                extensions=response.extensions,
                request=request,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return CappedTransport


def capped_client(limit: int, limits: Any = None, redact: Redactor = NOTHING, http: ModuleType = httpx) -> Any:
    """An async client of `http` (httpx, or httpx2 for the openai SDK) whose response bodies stop at
    `limit` bytes (decoded), lose the secrets `redact` knows, and that follows no redirect."""
    return http.AsyncClient(
        transport=_transport_class(http)(limit, limits, redact),
        follow_redirects=False,
        headers={"Accept-Encoding": ACCEPT_ENCODING},
    )


def redirect_message(status: int, location: str | None) -> str:
    """What a 3xx is recorded as: redirects are never followed."""
    where = f"redirect to {location[:300]}" if location else "a redirect without a Location"
    return f"the server answered {status} ({where}, not followed)"
