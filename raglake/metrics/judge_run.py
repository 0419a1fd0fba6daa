"""Run-level judge figures (METRICS.md §5 spot-check, §6 cost): calls, tokens, cost, disagreement."""

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
_stat(
    "judge_cost_usd",
    "cost_usd",
    "usd",
    "Cost from the price table (unknown models cost 0 and are flagged).",
    headline=True,
)
_stat("judge_skipped_budget", "skipped_budget", "count", "Judge calls not made because the budget ran out.")


@register(
    "judge_disagreement_rate",
    family="operational",
    scale="0-1",
    higher_is_better=False,
    seed="001",
    level="run",
    inputs=("judge_stats",),
)
def judge_disagreement_rate(run: RunInputs) -> list[RunValue]:
    """Spot-check: share of (case, step) pairs where the second judge's score differs by > 1 point (or the class differs); n = spot_check_n."""  # noqa: E501
    pairs = (run.judge_stats or {}).get("spot_pairs") or []
    if not pairs:
        return []
    return [
        RunValue("judge_disagreement_rate", sum(d for _, _, d in pairs) / len(pairs), None, len(pairs), "share"),
        RunValue("spot_check_n", float(len(pairs)), None, len({c for c, _, _ in pairs}), "pairs"),
    ]
