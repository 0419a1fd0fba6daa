"""The judge's settings: an OpenAI-compatible endpoint or the bundled local one, and the reliability
spot-check. Part of RunSettings (raglake.pipeline.settings); no API key is ever held here, only the name of the
variable that holds it."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from raglake.judge.config import JudgeConfig, load_prices
from raglake.judge.local import LOCAL_MODEL
from raglake.pipeline.fields import Cli

LOCAL_UNSTARTED = "http://127.0.0.1:0/v1"  # the local judge's address before its server is started: no port yet


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_DEFAULTS = JudgeConfig  # the judge's defaults are its gateway config's (raglake.judge.config), declared once


class JudgeSettings(_Settings):
    """An OpenAI-compatible judge (the user-settable fields of raglake.judge.config.JudgeConfig), or the bundled
    local one. No key is ever held here: only the name of the variable that holds it."""

    local: bool = Field(
        False,
        description="start the bundled llama.cpp judge (SmolLM2-135M, weak: for a fully offline pipeline; extra "
        "local-judge) for the run",
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL of the judge (OpenAI, Azure, vLLM, Ollama, llama.cpp)"
    )
    model: str | None = Field(None, min_length=1, description="judge model name")
    api_key_env: str = Field(
        _DEFAULTS.api_key_env, min_length=1, description="environment variable holding the judge's API key"
    )
    timeout_s: Annotated[float, Cli(aliases=("--judge-timeout",))] = Field(
        _DEFAULTS.timeout_s, gt=0, description="seconds per judge call, the whole response included"
    )
    concurrency: int = Field(_DEFAULTS.concurrency, ge=1, description="judge calls in flight at once")
    requests_per_minute: Annotated[int | None, Cli(aliases=("--judge-rpm",))] = Field(
        None, ge=1, description="judge requests per minute at most"
    )
    tokens_per_minute: Annotated[int | None, Cli(aliases=("--judge-tpm",))] = Field(
        None, ge=1, description="judge tokens per minute at most (estimated)"
    )
    max_retries: int = Field(
        _DEFAULTS.max_retries, ge=0, description="retries of a failed judge call (throttling, 5xx, time-outs)"
    )
    backoff_s: float = Field(_DEFAULTS.backoff_s, ge=0, description="first wait before a retry, doubled each time")
    max_backoff_s: float = Field(_DEFAULTS.max_backoff_s, ge=0, description="longest wait before a retry")
    seed: int = Field(_DEFAULTS.seed, description="sampling seed sent with every judge request")
    max_calls: int | None = Field(
        None, ge=0, description="budget: stop judging after this many calls (the rest: skipped, reason budget)"
    )
    max_cost_usd: Annotated[float | None, Cli(aliases=("--judge-max-cost",))] = Field(
        None, ge=0, description="budget: stop judging after this many US dollars"
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http(s) URL, got {value!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _local_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("local") and data.get("model") is None:
            return {**data, "model": LOCAL_MODEL}
        return data

    @model_validator(mode="after")
    def _endpoint(self) -> JudgeSettings:
        if self.local and self.base_url:
            raise ValueError("the local judge starts its own server: leave out the judge's base_url")
        if not self.local and not (self.base_url and self.model):
            raise ValueError("a judge needs both a base_url and a model (or `local: true` for the bundled one)")
        return self

    @classmethod
    def of(cls, value: Any) -> Any:
        """'local' is the bundled judge; anything else as given (a mapping, a JudgeSettings or None)."""
        return {"local": True} if value == "local" else value

    def config(self) -> JudgeConfig:
        fields = self.model_dump(exclude={"local"})
        if self.local and fields["base_url"] is None:
            fields["base_url"] = LOCAL_UNSTARTED  # replaced by the server's address once it runs (local_judge)
        return JudgeConfig(**fields, label="local" if self.local else None, prices=load_prices())


class SpotCheckSettings(_Settings):
    """A second judgement of a share of the questions (reliability): by a second judge model, by the same judge
    asked in the prompts' variant wording (`variant`), or both."""

    model: str | None = Field(
        None, min_length=1, description="second judge model for the reliability spot-check (default: the judge's)"
    )
    base_url: str | None = Field(None, description="its base URL (default: the judge's)")
    variant: bool = Field(
        False,
        description="spot-check by asking the prompts' variant wording (judge/prompts/variants), with the judge's "
        "model unless a spot-check model names another",
    )
    share: float = Field(0.1, gt=0, le=1, description="share of the questions judged again")
    minimum: Annotated[int, Cli(aliases=("--spot-check-min",))] = Field(
        10, ge=0, description="at least this many questions judged again"
    )

    @model_validator(mode="after")
    def _second_opinion(self) -> SpotCheckSettings:
        if self.model is None and not self.variant:
            raise ValueError(
                "a spot-check needs a second model (spot_check.model, --spot-check-model) or the prompts' variant "
                "wording (spot_check.variant, --spot-check-variant)"
            )
        return self


# a judge field of a settings model: `local` (the eval file's `judge: local`, the API's judge="local") is the
# bundled judge; a mapping or a JudgeSettings as given
JudgeField = Annotated[JudgeSettings | None, BeforeValidator(JudgeSettings.of)]
