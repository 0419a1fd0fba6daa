"""Secrets out of everything raglake keeps or prints. The HTTP edges (the judge gateway, the http target)
build a Redactor from what they send (the judge's API key; every `${VAR}` value an http target config
expands; the values of Authorization, Cookie, X-Api-Key, ... headers) and pass every error text, reply and
request through it before anything is written or printed: a server that echoes a key back never gets it
stored. Each secret is also found percent-encoded, JSON- or repr-escaped and base64-encoded; error texts
also lose any `Bearer <token>` / `Basic <token>` credential, known or not."""

from __future__ import annotations

import base64
import binascii
import json
import re
import urllib.parse
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"
# headers whose values are credentials (compared lower-case)
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token"}
)
# any other header whose name says it carries a credential (Ocp-Apim-Subscription-Key, X-Goog-Api-Key, …)
_SECRET_NAME = re.compile(r"(?i)key|token|secret|auth|passw|signature|session|cookie|credential")
# shorter values are not hidden: a 3-letter value would blank the same letters out of every answer
MIN_SECRET_CHARS = 8
_SCHEME = re.compile(r"^\s*(?:bearer|basic|token|digest)\s+(\S+)\s*$", re.IGNORECASE)
# a credential in an error text: the scheme, then a token of 8+ characters (see _credential)
_CREDENTIAL = re.compile(r"(?i)\b(bearer|basic)(\s+|%20|\+)([A-Za-z0-9._~+/=-]{8,})")


def _forms(secret: str) -> set[str]:
    """The ways a secret shows up in an echoed body or an exception text."""
    forms = {
        secret,
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret, safe=""),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
    }
    return {f for f in forms if len(f) >= MIN_SECRET_CHARS}


def _parts(name: str, value: str) -> set[str]:
    """A header value and what it carries: `Bearer X` also gives X; `Basic B64` also gives B64, the decoded
    `user:password` and the password; a cookie list gives each cookie's value."""
    parts = {value}
    scheme = _SCHEME.match(value)
    if scheme:
        token = scheme.group(1)
        parts.add(token)
        try:
            decoded = base64.b64decode(token, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            decoded = ""
        if ":" in decoded:
            parts.update({decoded, decoded.split(":", 1)[1]})
    if "cookie" in name:
        for cookie in value.split(";"):
            cookie_value = cookie.partition("=")[2].strip()
            if cookie_value:
                parts.add(cookie_value)
    return parts


def _credential(m: re.Match[str]) -> str:
    """A `Bearer` token holding a digit, or a `Basic` one that decodes to `user:password`, redacted; a
    word ("Bearer authentication") left alone."""
    scheme, gap, token = m.groups()
    if scheme.lower() == "bearer":
        secret = any(c.isdigit() for c in token)
    else:
        try:
            secret = ":" in base64.b64decode(token + "=" * (-len(token) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            secret = False
    return f"{scheme}{gap}{REDACTED}" if secret else m.group(0)


class Redactor:
    """`redactor(text)`: the text with every known secret replaced by `[redacted]`; `redactor.error(text)`
    also replaces any `Bearer`/`Basic` credential (for error texts, where a lookalike costs nothing)."""

    def __init__(self, secrets: Iterable[str | None] = ()):
        forms: set[str] = set()
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET_CHARS:
                forms |= _forms(secret)
        self.secrets = frozenset(forms)
        ordered = sorted(forms, key=len, reverse=True)  # the longest first: a secret inside another goes whole
        self._pattern = re.compile("|".join(re.escape(f) for f in ordered)) if ordered else None
        self._bytes = re.compile(b"|".join(re.escape(f.encode()) for f in ordered)) if ordered else None
        self._longest = len(ordered[0]) if ordered else 0

    @classmethod
    def for_request(cls, headers: Mapping[str, str], secrets: Iterable[str | None] = ()) -> Redactor:
        """The secrets a request carries: `secrets` (an API key, expanded `${VAR}` values) and the values
        of its credential headers."""
        found = [s for s in secrets if s]
        for name, value in headers.items():
            if value and (name.lower() in SECRET_HEADERS or _SECRET_NAME.search(name)):
                found += _parts(name.lower(), value)
        return cls(found)

    def __call__(self, text: str | None) -> str | None:
        if not text or self._pattern is None:
            return text
        return self._pattern.sub(REDACTED, text)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def body(self, data: bytes) -> bytes:
        """A response body with every known secret replaced, byte for byte elsewhere."""
        return self._bytes.sub(REDACTED.encode(), data) if self._bytes is not None else data

    def error(self, text: str, limit: int | None = None) -> str:
        """An error text without known secrets or `Bearer`/`Basic` credentials, cut to `limit` characters
        after the whole text is redacted (a secret across the cut is never left half there)."""
        text = _CREDENTIAL.sub(_credential, self(text) or "")  # the whole text first: a cut could halve a secret
        return text if limit is None else text[:limit]


NOTHING = Redactor()
