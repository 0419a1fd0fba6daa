"""The commented starter eval file `raglake init` writes next to a golden set."""

from __future__ import annotations

from pathlib import Path

from raglake.golden import ANSWERS, what_it_holds
from raglake.metrics.registry import FAMILIES
from raglake.pipeline.settings import SAMPLE_DIR, JudgeSettings, RunSettings, SpotCheckSettings

_RUN = RunSettings.model_fields
_JUDGE = JudgeSettings.model_fields
_SPOT = SpotCheckSettings.model_fields


def starter_text(golden: str, targets: list[str]) -> str:
    """The file's text: the settings a team sets first, the rest as comments (every default shown is the
    settings model's own). `golden` and `targets` are written as given (relative to the file's folder)."""
    target_lines = "\n".join(f"  - {t!r}" for t in targets)
    return f"""\
# raglake eval file: one evaluation, kept in git beside its golden set.
# `raglake run` in this folder runs it; any option of `raglake run` overrides its field.
# Check it without running: raglake config check      Editor completion: raglake config schema > raglake.schema.json
# Paths are relative to this file.

golden: {golden!r}            # the questions (JSONL, JSON or YAML)
targets:                      # the systems to evaluate; several are compared with each other
{target_lines}
  # - "http:service.yaml"     # a live RAG service (see the README, "A live service")
  # - "replay:answers.jsonl"  # answers your system already gave

lake: lake                    # where the results land (a folder, or an fsspec URL such as s3://bucket/raglake)
k: {_RUN["k"].default}                          # the retrieval metrics' cut-off

# metrics: [recall_any_at_k, ndcg_at_k, semantic_similarity]   # default: every built-in metric (and yours below)
# families: [retrieval, embedding]    # or whole families: {", ".join(FAMILIES)}

# judge:                       # LLM-judge metrics (without a judge they are skipped, never scored 0)
#   base_url: "https://api.openai.com/v1"
#   model: "gpt-4o-mini"
#   api_key_env: {_JUDGE["api_key_env"].default}   # the variable holding the key (the key itself is never stored)
#   max_cost_usd: 5
# judge: local                 # or the bundled offline judge (weak; extra local-judge)
# spot_check: {{model: "gpt-4o", share: {_SPOT["share"].default}, minimum: {_SPOT["minimum"].default}}}

# Your own checks (README, "Make it yours"):
# plugins: [checks.py]         # Python metrics: @raglake.metric("short_answer") def short_answer(case): ...
# rubrics:                     # judge rubrics (GEval-style)
#   polite_tone: {{criteria: "Is the answer courteous and free of blame?", inputs: [answer], scale: [1, 5]}}
# assertions:                  # deterministic checks of every answer
#   cites_policy: {{type: regex, pattern: "PN-[0-9]{{4}}"}}

# gate:                        # `raglake gate` in CI: fail when a metric really drops
#   rules:
#     - {{metric: recall_any_at_k, max_drop: 0.02}}
"""


def starter_paths(golden: Path, folder: Path) -> tuple[str, list[str]]:
    """The golden set's path and the targets, as the eval file in `folder` names them (relative to it where they lie
    beneath it): the golden file itself when it holds another tool's answers, replay files beside it
    (`<stem>.captures.jsonl`, as `raglake import` writes them), else the builtin RAG over the sample corpus."""

    def named(path: Path) -> str:
        return path.relative_to(folder).as_posix() if path.is_relative_to(folder) else str(path)

    if what_it_holds(golden) == ANSWERS:
        return named(golden), [f"replay:{named(golden)}"]
    stem = golden.name.removesuffix(".jsonl").removesuffix(".golden")
    found = sorted(golden.parent.glob(f"{stem}*.captures.jsonl"))
    return named(golden), [f"replay:{named(p)}" for p in found] or [f"builtin:{SAMPLE_DIR / 'corpus'}"]
