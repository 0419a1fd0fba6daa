"""How a run reaches its judge: an OpenAI-compatible endpoint, limits, budget, prices."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from raglake.errors import ConfigError
from raglake.httpedge import JUDGE_MAX_RESPONSE_BYTES
from raglake.records import read_yaml_mapping

PRICES_FILE = Path(__file__).resolve().parent / "prices.yaml"


def load_prices(path: str | Path = PRICES_FILE) -> dict[str, dict[str, float]]:
    """model -> {input, output}: US dollars per million tokens (a config file: size, aliases and duplicate
    keys bounded as every config file's are)."""
    record, _ = read_yaml_mapping(path, missing="price file not found", not_mapping="expected a mapping with `models:`")
    prices = record.data.get("models") or {}
    if not isinstance(prices, dict):
        raise ConfigError(f"{path}: `models` must map model names to {{input: …, output: …}}")
    for model, p in prices.items():
        if not isinstance(p, dict) or set(p) != {"input", "output"}:
            raise ConfigError(f"{path}: price of {model!r} must be {{input: …, output: …}} in USD per million tokens")
    return prices


@dataclass(frozen=True)
class JudgeConfig:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"  # the key is read from this variable, never stored
    timeout_s: float = 60.0  # one attempt, whole: connect, headers and body
    concurrency: int = 8
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    seed: int = 0
    max_calls: int | None = None  # budget: calls that reach the server (ledger hits are free)
    max_cost_usd: float | None = None
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    label: str | None = None  # e.g. "local" for the bundled llama.cpp judge
    prompt_variant: bool = False  # ask every prompt in its variant wording (the spot-check's option B)
    max_response_bytes: int = JUDGE_MAX_RESPONSE_BYTES  # a reply's body, after decompression

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"--judge-base-url must be an http(s) URL, got {self.base_url!r}")
        if not self.model:
            raise ConfigError("--judge-model is required with --judge-base-url")
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0 or self.max_response_bytes < 1:
            raise ConfigError(
                f"bad judge limits: concurrency={self.concurrency}, retries={self.max_retries}, "
                f"timeout={self.timeout_s}, max_response_bytes={self.max_response_bytes}"
            )

    @property
    def api_key(self) -> str:
        # local servers take any key; hosted ones fail with a clear 401 recorded as judge_error
        return os.environ.get(self.api_key_env) or "not-needed"

    def secret(self) -> str | None:
        """The key when one is set (what the gateway redacts from everything it keeps)."""
        return os.environ.get(self.api_key_env) or None

    def price(self) -> tuple[float, float] | None:
        p = self.prices.get(self.model)
        return (p["input"], p["output"]) if p else None

    def recorded(self) -> dict[str, Any]:
        """What the run stores about its judge: no key, only the variable's name."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api_key_env": self.api_key_env,
            "timeout_s": self.timeout_s,
            "concurrency": self.concurrency,
            "seed": self.seed,
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "max_calls": self.max_calls,
            "max_cost_usd": self.max_cost_usd,
            "label": self.label,
            "prompt_variant": self.prompt_variant,
        }

    def with_model(self, model: str, base_url: str | None = None, prompt_variant: bool = False) -> JudgeConfig:
        """The spot-check's judge: another model (or this one), asked in the prompts' variant wording or not."""
        return replace(self, model=model, base_url=base_url or self.base_url, prompt_variant=prompt_variant)
