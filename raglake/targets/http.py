"""`http:CONFIG.yaml`: capture from a live RAG service (see raglake.targets.http_config for the file)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from raglake import progress
from raglake.builtin.index import IndexManifest
from raglake.golden import GoldenSet
from raglake.httpedge import ResponseTooLarge, capped_client, redirect_message
from raglake.redact import Redactor
from raglake.schemas import Capture, GoldenCase
from raglake.targets.base import safe_name
from raglake.targets.http_client import SharedLimit, capture_all, json_body
from raglake.targets.http_config import load_http_config
from raglake.targets.journal import CaptureJournal


class HttpTarget:
    kind = "http"
    deterministic = False  # a live service: every run asks again (a resumed run asks only what is missing)

    def __init__(self, config_path: str, k: int = 5):
        self.config_path = Path(config_path)
        self.config = load_http_config(self.config_path)
        self.name = safe_name(self.config.name or self.config_path.stem)
        if self.config.name is None:
            self.config = self.config.model_copy(update={"name": self.name})
        self.spec = f"http:{config_path}"
        self.k = k
        # one limit for every capture batch of the run: the flow hands each batch this same object
        self.limit = SharedLimit(self.config.concurrency)
        self._manifest: IndexManifest | None = None
        self._manifest_loaded = False

    def content_key(self) -> str:
        """The config and k (sent to the service): a capture answers exactly these settings."""
        return f"http:{self.config.fingerprint()}:k={self.k}"

    def recorded_config(self) -> dict[str, Any]:
        """What the run records about this target: the config without secrets."""
        return self.config.secret_free()

    def check(self, golden: GoldenSet) -> None:
        """A missing secret or an unreadable manifest fails before any request is made."""
        self.config.resolved_headers()
        self.manifest()

    def capture(self, cases: list[GoldenCase], journal: CaptureJournal | None = None) -> list[Capture]:
        done = journal.completed(cases) if journal else {}
        progress.advance("captures", len(done))  # journalled earlier: not asked again
        todo = [c for c in cases if c.id not in done]
        fresh = (
            asyncio.run(capture_all(self.config, todo, self.k, journal.append if journal else None, self.limit))
            if todo
            else []
        )
        by_id = {**done, **{c.case_id: c for c in fresh}}
        return [by_id[c.id] for c in cases]

    def known_docs(self) -> frozenset[str]:
        manifest = self.manifest()
        return manifest.doc_paths if manifest else frozenset()

    def manifest(self) -> IndexManifest | None:
        """The service's index manifest, from `manifest_url` or `manifest_file`, when configured."""
        source = self.config.manifest_url or self.config.manifest_file
        if self._manifest_loaded or not source:
            return self._manifest
        field = "manifest_url" if self.config.manifest_url else "manifest_file"
        redact = Redactor.for_request(self.config.resolved_headers(), self.config.secret_values())
        try:
            if self.config.manifest_url:
                data = asyncio.run(self._fetch_manifest(self.config.manifest_url, redact))
            else:
                path = Path(self.config.manifest_file)
                if not path.is_absolute():
                    path = self.config_path.parent / path
                data = json.loads(path.read_text(encoding="utf-8"))
            self._manifest, self._manifest_loaded = IndexManifest.from_json(data), True
        except (
            httpx.HTTPError,
            OSError,  # TimeoutError included: the deadline
            ValueError,
            RecursionError,
            TypeError,
            ResponseTooLarge,
        ) as e:  # ValueError: not JSON, not a manifest
            why = redact.error(str(e) or f"no response within {self.config.timeout_s:g} s")
            raise self.config.problem(field, f"cannot read the index manifest from {source}: {why}") from None
        return self._manifest

    async def _fetch_manifest(self, url: str, redact: Redactor) -> Any:
        """GET the manifest under the target's limits: one deadline, the size cap, no redirect followed."""
        async with (
            capped_client(self.config.max_response_bytes, redact=redact) as client,
            asyncio.timeout(self.config.timeout_s),
        ):
            response = await client.get(url, headers=self.config.resolved_headers(), timeout=self.config.timeout_s)
        if response.is_redirect:
            raise ValueError(redirect_message(response.status_code, response.headers.get("location")))
        response.raise_for_status()
        return json_body(response, redact)
