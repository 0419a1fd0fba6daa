"""A metric at its own settings: `ndcg_at_k@k=10` is ndcg_at_k computed with k = 10 whatever the run's k, so one
run can hold P@5 and P@10; `context_sufficiency@theta_s=0.6` the same with its own threshold. Named anywhere a
metric is named (the eval file's `metrics:` also as `{name: ndcg_at_k, k: 10}`), made on first use, registered
like a user's metric (origin `variant`), versioned by its base's version and its settings."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any

from raglake.errors import ConfigError
from raglake.metrics.columnar import BatchContext
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Metric, add_maker, add_metric, get_metric

# the scoring settings a metric may take for itself (ScoringConfig's fields), and how each is read
PARAMS: dict[str, type] = {
    "k": int,
    "theta_s": float,
    "theta_h": float,
    "theta_h_chunk_cos": float,
    "require_snippets": bool,
}
VARIANT = re.compile(r"(?P<base>[a-z][a-z0-9_]*)@(?P<params>[a-z_]+=[^,@=]+(?:,[a-z_]+=[^,@=]+)*)")
_EMBEDDED = ("vectors", "token_embeddings")  # inputs the embedding stage prepares at the run's k
_KINDS = {int: "a whole number", float: "a number", bool: "true or false"}
_RANKING = ("k", "require_snippets")  # what every retrieval metric reads (the cut-off, the matching rule)


def variant_name(base: str, params: Mapping[str, Any]) -> str:
    """`ndcg_at_k@k=10` (settings sorted by name): the one spelling of a variant."""
    return f"{base}@" + ",".join(f"{k}={_text(params[k])}" for k in sorted(params))


def _text(value: Any) -> str:
    """A setting as its variant's name spells it: every digit of a float kept (repr), so two settings never
    share a name (and a version)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(float(value)) if isinstance(value, float) else str(value)


def deeper_than(metrics: Iterable[Metric], k: int) -> Metric | None:
    """A variant asking for more retrieved chunks than a run with cut-off `k` asks its target for (its values
    would be computed over too few chunks), or None."""
    return next((m for m in metrics if isinstance(m.fn, VariantFunction) and m.fn.params.get("k", 0) > k), None)


def _value(name: str, text: str, full: str) -> Any:
    kind = PARAMS[name]
    try:
        if kind is bool:
            if text not in ("true", "false"):
                raise ValueError
            return text == "true"
        return kind(text)
    except ValueError:
        raise ConfigError(f"metric {full!r}: {name} takes {_KINDS[kind]}, got {text!r}") from None


def metric_entry(entry: Any) -> Any:
    """An eval file's `metrics:` item as a name: a string as it is, `{name: ndcg_at_k, k: 10}` as its variant's
    name (`ndcg_at_k@k=10`); anything else is left for validation to refuse."""
    if not isinstance(entry, Mapping):
        return entry
    params = dict(entry)
    base = params.pop("name", None)
    if not isinstance(base, str):
        raise ValueError("a metric given as a mapping needs its `name` (and settings such as k: 10)")
    unknown = sorted(set(params) - set(PARAMS))
    if unknown:
        raise ValueError(f"metric {base!r}: a metric takes its own {', '.join(PARAMS)}, not {unknown[0]!r}")
    return variant_name(base, params) if params else base


def parse(name: str) -> tuple[str, dict[str, Any]] | None:
    """(base, settings) of a variant's name; None for a plain name."""
    m = VARIANT.fullmatch(name)
    if m is None:
        return None
    params: dict[str, Any] = {}
    for part in m["params"].split(","):
        key, _, text = part.partition("=")
        if key not in PARAMS:
            raise ConfigError(f"metric {name!r}: a metric takes its own {', '.join(PARAMS)}, not {key!r}")
        params[key] = _value(key, text, name)
    return m["base"], params


def make_variant(name: str) -> Metric | None:
    """The variant `name` (registered on first use), or None when `name` is no variant's."""
    parsed = parse(name)
    if parsed is None:
        return None
    base_name, params = parsed
    base = get_metric(base_name)
    problem = _refused(base, params)
    if problem:
        raise ConfigError(f"metric {name!r}: {problem}")
    try:
        ScoringConfig(**params)  # k ≥ 1, thresholds in range
    except (TypeError, ValueError) as e:
        raise ConfigError(f"metric {name!r}: {e}") from None
    canonical = variant_name(base_name, params)
    settings = ", ".join(f"{k} = {_text(v)}" for k, v in sorted(params.items()))
    metric = dataclasses.replace(
        base,
        name=canonical,
        version=f"{base.version}+{canonical.split('@', 1)[1]}",
        description=f"{base.description} ({settings})",
        fn=VariantFunction(base.fn, params),
        columnar=VariantColumnar(base.columnar, params) if base.columnar is not None else None,
        origin="variant",
        source=base_name,
        headline=False,
        worst_cases=False,
    )
    return add_metric(metric)


def _refused(base: Metric, params: Mapping[str, Any]) -> str | None:
    """Why `base` cannot take these settings (None: it can). A setting must change its values: k and
    require_snippets a retrieval metric's, a threshold a metric whose rule reads it."""
    if base.origin != "builtin":
        return "only a built-in metric takes settings of its own"
    if base.steps:
        return "a judge metric is judged at the run's settings; set them for the run instead"
    if "k" in params and any(i in base.inputs for i in _EMBEDDED):
        return "an embedding metric's texts are encoded at the run's k; set k for the run instead"
    source = inspect.getsource(base.fn)
    unused = [p for p in params if not (base.family == "retrieval" if p in _RANKING else f".{p}" in source)]
    if unused:
        return f"{', '.join(sorted(unused))} does not change {base.name}"
    return None


@dataclasses.dataclass(frozen=True)
class VariantFunction:
    """The base metric's function, given the case with the variant's settings."""

    fn: Any
    params: dict[str, Any]

    def __call__(self, ctx: CaseContext) -> Any:
        return self.fn(ctx.with_config(dataclasses.replace(ctx.config, **self.params)))


@dataclasses.dataclass(frozen=True)
class VariantColumnar:
    """The base metric's vectorised form over the batch with the variant's settings."""

    fn: Any
    params: dict[str, Any]

    def __call__(self, bc: BatchContext) -> Any:
        return self.fn(bc.with_config(dataclasses.replace(bc.config, **self.params)))


add_maker(make_variant)
