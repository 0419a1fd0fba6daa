"""Run-level judge figures (METRICS.md §5 spot-check, §6 cost): calls, tokens, cost and whether every call
had a price, disagreement. The judge's latency per prompt is among latency_p50_ms / latency_p95_ms."""

from __future__ import annotations

from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import RunValue, register


def _stat(name: str, key: str, unit: str, doc: str, headline: bool = False) -> None:
    def fn(run: RunInputs) -> list[RunValue]:
        stats = run.judge_stats
        if not stats or key not in stats:
            return []
        return [RunValue(name, float(stats[key]), None, len(run.captures), unit)]

    fn.__doc__, fn.__name__ = doc, name
    register(
        name,
        family="operational",
        scale=unit,
        higher_is_better=False if unit == "usd" else None,
        seed="001",
        level="run",
        inputs=("judge_stats",),
        headline=headline,
    )(fn)


_stat("judge_calls", "calls", "count", "Requests that reached the judge (retries and repairs included).", headline=True)
_stat("judge_ledger_hits", "ledger_hits", "count", "Judge calls answered from the ledger (not made again, not paid).")
_stat("judge_prompt_tokens", "prompt_tokens", "tokens", "Prompt tokens the judge's API reported.")
_stat("judge_completion_tokens", "completion_tokens", "tokens", "Completion tokens the judge's API reported.")


@register(
    "judge_cost_usd",
    family="operational",
    scale="usd",
    higher_is_better=False,
    seed="001",
    version="2",
    level="run",
    inputs=("judge_stats",),
    headline=True,
)
def judge_cost_usd(run: RunInputs) -> list[RunValue]:
    """Cost from the price table; NaN when no call had a price, and judge_price_known says whether every call had one."""  # noqa: E501
    stats = run.judge_stats
    if not stats or "cost_usd" not in stats:
        return []
    unknown = stats.get("unpriced_calls", 0) > 0 and not stats.get("priced_calls", 0)
    cost = float("nan") if unknown else float(stats["cost_usd"])  # no call had a price: unknown, not free
    return [RunValue("judge_cost_usd", cost, None, len(run.captures), "usd")]


@register(
    "judge_price_known",
    family="operational",
    scale="binary",
    higher_is_better=None,
    seed="001",
    level="run",
    inputs=("judge_stats",),
)
def judge_price_known(run: RunInputs) -> list[RunValue]:
    """1 when every judge call made had a price in the price table, 0 when one did not (judge_cost_usd leaves it out); n = calls."""  # noqa: E501
    stats = run.judge_stats
    if not stats or not stats.get("calls"):
        return []
    return [RunValue("judge_price_known", float(not stats.get("unpriced_calls")), None, int(stats["calls"]), "flag")]


_stat("judge_skipped_budget", "skipped_budget", "count", "Judge calls not made because the budget ran out.")


@register(
    "judge_disagreement_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    version="2",
    level="run",
    inputs=("judge_stats",),
)
def judge_disagreement_rate(run: RunInputs) -> list[RunValue]:
    """Spot-check: share of (case, step) pairs where the second judgement's score differs by > 1 point (or the class differs); spot_check_n = questions judged twice."""  # noqa: E501
    pairs = (run.judge_stats or {}).get("spot_pairs") or []
    if not pairs:
        return []
    questions = len({c for c, _, _ in pairs})
    return [
        RunValue("judge_disagreement_rate", sum(d for _, _, d in pairs) / len(pairs), None, len(pairs), "share"),
        RunValue("spot_check_n", float(questions), None, questions, "questions"),
    ]
