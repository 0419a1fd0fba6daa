"""The `http` target's configuration file: where to send each question, how to build the request,
and how to map the JSON response onto a capture (JSON paths)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from raglake.errors import ConfigError, InputError, RaglakeError, did_you_mean
from raglake.httpedge import TARGET_MAX_RESPONSE_BYTES
from raglake.records import read_yaml_mapping, validate_record

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
TEMPLATE_FIELDS = ("question", "case_id", "category", "difficulty", "vault", "tags", "k")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChunkMapping(_Strict):
    rank: str | None = "rank"  # None: the list order gives the rank
    rel_path: str = "rel_path"
    heading_path: str | None = "heading_path"
    text: str | None = "text"
    score: str | None = "score"
    chunk_id: str | None = None


class ReferenceMapping(_Strict):
    rel_path: str = "rel_path"
    heading_path: str | None = "heading_path"


class ResponseMapping(_Strict):
    """JSON paths (`a.b[0].c`; a leading `$.` is allowed) into the response body; None: not given."""

    answer: str = "answer"
    abstained: str | None = "abstained"
    references: str | None = "references"
    reference: ReferenceMapping = ReferenceMapping()
    retrieved: str | None = "chunks"
    chunk: ChunkMapping = ChunkMapping()
    folder_mode: str | None = None
    selected_folders: str | None = None
    latency_ms: dict[str, str] = {}  # stage (folder_selection, retrieval, generation, total) -> path
    # what the call cost, US dollars (`$.usage.cost`); left out of the config's dump when not given, so the
    # fingerprint (the key of its staged captures) of a config without it stays what it was
    cost_usd: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @field_validator("latency_ms")
    @classmethod
    def _stages(cls, v: dict[str, str]) -> dict[str, str]:
        allowed = ("folder_selection", "retrieval", "generation", "total")
        bad = [k for k in v if k not in allowed]
        if bad:
            raise ValueError(
                f"unknown latency stage {bad[0]!r}{did_you_mean(bad[0], allowed)}; stages: {', '.join(allowed)}"
            )
        return v


class HttpTargetConfig(_Strict):
    url: str = Field(pattern=r"^https?://")
    method: str = "POST"
    headers: dict[str, str] = {}  # values may name environment variables: "Bearer ${RAG_TOKEN}"
    body: Any = {"question": "{question}"}  # JSON template; "{question}", "{case_id}", … are filled in
    response: ResponseMapping = ResponseMapping()
    name: str | None = None  # how runs of this target are labelled (default: the config file's stem)
    concurrency: int = Field(default=8, ge=1, le=512)
    timeout_s: float = Field(default=30.0, gt=0)  # one attempt, whole: connect, headers and body
    max_response_bytes: int = Field(default=TARGET_MAX_RESPONSE_BYTES, ge=1)  # after decompression
    retries: int = Field(default=3, ge=0, le=10)
    backoff_s: float = Field(default=0.5, ge=0)
    max_backoff_s: float = Field(default=30.0, ge=0)
    manifest_url: str | None = None  # GET returns the service's index manifest (coverage stats)
    manifest_file: str | None = None
    _source: tuple[str, dict[str, int]] | None = PrivateAttr(default=None)  # the file and its fields' lines

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v.upper() not in ("GET", "POST", "PUT"):
            raise ValueError(f"method must be GET, POST or PUT, got {v!r}")
        return v.upper()

    def secret_free(self) -> dict[str, Any]:
        """The config as recorded in the lake: header values are never stored, only their env-var names."""
        data = self.model_dump(mode="json")
        data["headers"] = {
            k: "<from ${%s}>" % ", ".join(_ENV.findall(v)) if _ENV.search(v) else "<redacted>"
            for k, v in self.headers.items()
        }
        return data

    def fingerprint(self) -> str:
        return hashlib.sha256(json.dumps(self.secret_free(), sort_keys=True).encode()).hexdigest()[:16]

    def secret_values(self) -> list[str]:
        """The values of the environment variables the headers name (what the redaction hides), set ones only."""
        names = {name for value in self.headers.values() for name in _ENV.findall(value)}
        return [os.environ[name] for name in sorted(names) if os.environ.get(name)]

    def resolved_headers(self) -> dict[str, str]:
        def resolve(name: str, value: str) -> str:
            def env(m: re.Match[str]) -> str:
                if m.group(1) not in os.environ:
                    raise self.problem(
                        f"headers.{name}", f"needs environment variable ${{{m.group(1)}}}, which is not set"
                    )
                return os.environ[m.group(1)]

            return _ENV.sub(env, value)

        return {k: resolve(k, v) for k, v in self.headers.items()}

    def problem(self, field: str, message: str) -> RaglakeError:
        """An error about `field` found after loading (an unset variable, an unreadable manifest), naming
        the config file and the field's line when the config came from a file."""
        if self._source is None:
            return ConfigError(f"http target config field {field!r}: {message}")
        path, lines = self._source
        return InputError(path, lines.get(field, lines.get(field.split(".")[0])), field, message)


def render_body(template: Any, values: dict[str, Any]) -> Any:
    """The request body: a string that is exactly "{field}" takes the value as is (lists stay lists);
    other strings get the placeholders replaced; a missing field is an error."""
    if isinstance(template, dict):
        return {k: render_body(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [render_body(v, values) for v in template]
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: "" if values[m.group(1)] is None else str(values[m.group(1)]), template)
    return template


def template_fields(template: Any) -> set[str]:
    if isinstance(template, dict):
        return set().union(*(template_fields(v) for v in template.values())) if template else set()
    if isinstance(template, list):
        return set().union(*(template_fields(v) for v in template)) if template else set()
    return set(_PLACEHOLDER.findall(template)) if isinstance(template, str) else set()


def load_http_config(path: str | Path) -> HttpTargetConfig:
    """Read and validate a YAML or JSON config; errors name the file, the line and the field."""
    path = Path(path)
    record, node = read_yaml_mapping(
        path, missing="http target config not found", not_mapping="expected a mapping with at least `url`"
    )
    config = validate_record(record, HttpTargetConfig, path)
    lines = {str(k): line for k, line in record.key_lines.items()}
    headers = next((v for k, v in node.value if k.value == "headers"), None)
    if isinstance(headers, yaml.MappingNode):  # each header's own line, for an unset variable in it
        lines.update({f"headers.{k.value}": k.start_mark.line + 1 for k, _ in headers.value})
    config._source = (str(path), lines)
    unknown = template_fields(config.body) - set(TEMPLATE_FIELDS)
    if unknown:
        name = sorted(unknown)[0]
        raise InputError(
            str(path),
            record.key_lines.get("body"),
            "body",
            f"unknown placeholder {{{name}}}{did_you_mean(name, TEMPLATE_FIELDS)}; "
            f"fields: {', '.join(TEMPLATE_FIELDS)}",
        )
    return config
