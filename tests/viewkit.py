"""The lake `raglake view`'s tests read: the sample's two replayed methods (basic_search, then local_search)
judged by the real gateway against the loopback fake OpenAI server (tests/fake_openai.py: every judge call
lands in the lake's ledger with its request, reply, tokens, model and fingerprint), an eval file's
`slices: [author]` (the meta.author dimension), and a run whose texts are hostile: markup, `javascript:`
links, a huge answer, a case id shaped like a path."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from raglake.judge.gateway import JudgeGateway
from raglake.judge.ledger import JudgeLedger
from raglake.lake.calls import LakeCallStore
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metrics.operational import RunInputs
from raglake.metrics.registry import all_metrics, metric_versions
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from tests.fake_openai import FakeOpenAI, canned_reply, ok, prompt_id_of
from tests.judgekit import judge_outcomes
from tests.lakekit import land
from tests.rowpath import land_scored_run, score_batch
from tests.samplepair import BASIC, GOLDEN, LOCAL

METRICS = [
    "recall_any_at_k",
    "mrr_at_k",
    "abstention_accuracy",
    "answer_relevance_emb",
    "answer_hallucination",
    "correctness",
    "groundedness",
]
REASONING = "The answer names the instance but <b>not</b> the upgrade."
HUGE = 300_000  # characters of the hostile run's huge answer
HOSTILE_ID = "../../etc/passwd"  # a case id shaped like a path: only ever a SQL parameter
SCRIPT = "<script>alert('pwned')</script>"
JS_LINK = '<a href="javascript:alert(1)">click</a>'


def _score(text: str) -> int:
    """A stable 1-5 score of an answer (the two methods' answers differ, so some cases get worse)."""
    return 1 + hashlib.sha256(text.encode()).digest()[0] % 5


def judge_reply(body: dict[str, Any]):
    """The fake judge: correctness and groundedness scored from the answer's hash, with reasoning and claims."""
    pid = prompt_id_of(body)
    user = user_message_of(body)
    if pid == "correctness":
        return ok({"score": _score(user), "reasoning": REASONING})
    if pid == "groundedness":
        return ok(
            {
                "score": _score(user[::-1]),
                "supported_claims": ["Atlas runs on RDS"],
                "unsupported_claims": ["it was upgraded twice"],
                "reasoning": "one claim has no support",
            }
        )
    return canned_reply(body)


def user_message_of(body: dict[str, Any]) -> str:
    return next((m["content"] for m in body.get("messages", []) if m["role"] == "user"), "")


def land_judged(lake: str, target: str, run_id: str, server: FakeOpenAI, minutes: int) -> str:
    """The sample scored through the real judge gateway (the fake server behind it), landed as `run_id`."""
    plan = plan_run(
        RunSettings(
            golden=GOLDEN,
            target=target,
            lake=lake,
            run_id=run_id,
            metrics=METRICS,
            slices=["author"],  # an eval file's `slices:`: the dimension meta.author
            judge={"base_url": server.url, "model": "gpt-4o-mini", "max_retries": 0},
        )
    )
    plan.started_at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(minutes=minutes)
    captures = plan.target.capture(plan.golden.cases)
    pairs = list(zip(plan.golden.cases, captures))
    embedding = plan.embedding_spec()
    encoder = embedding.encoder() if embedding else None
    gateway = JudgeGateway(plan.judge, JudgeLedger(LakeCallStore(plan.lake), run_id))
    outcomes = judge_outcomes(pairs, plan.metrics, plan.config, gateway=gateway, encoder=encoder)
    gateway.ledger.flush()
    scored = score_batch(
        pairs, plan.metrics, plan.config, encoder=encoder, idf=embedding.idf if embedding else None, judge=outcomes
    )
    run_level = all_metrics(level="run")
    stats = dataclasses.asdict(gateway.stats)  # what the flow hands the run-level judge figures
    values = [v for m in run_level for v in m.fn(RunInputs(captures, judge_stats=stats))]
    record = plan.record(plan.started_at + dt.timedelta(seconds=5), len(captures), embedder_key=embedding.key)
    record.metric_versions.update(metric_versions(run_level))
    land_scored_run(plan.lake, record, plan.golden.cases, captures, scored, values, plan.scoring_id)
    return run_id


def write_hostile_inputs(folder: Path) -> tuple[str, str]:
    """A golden set and replayed captures whose every text is hostile."""
    golden = [
        {
            "id": HOSTILE_ID,
            "question": f"Is {SCRIPT} safe?",
            "reference_answer": f"No: {JS_LINK}.",
            "category": "adversarial",
            "tags": ["<img src=x onerror=alert(2)>"],
            "metadata": {"author": "<script>alert(4)</script>"},
            "gold_supports": [{"rel_path": "work/a.md", "heading_path": "A"}],
        },
        {
            "id": "huge",
            "question": "How long can an answer be?",
            "reference_answer": "Short.",
            "gold_supports": [{"rel_path": "work/a.md", "heading_path": "A"}],
        },
    ]
    captures = [
        {
            "case_id": HOSTILE_ID,
            "method": "m",
            "answer": f"{SCRIPT} then {JS_LINK}",
            "retrieved": [
                {"rank": 1, "rel_path": "javascript:alert(3)", "heading_path": "A", "text": f"chunk {SCRIPT}"}
            ],
        },
        {
            "case_id": "huge",
            "method": "m",
            "answer": "start " + "x" * HUGE + " END-OF-HUGE",
            "retrieved": [{"rank": 1, "rel_path": "work/a.md", "heading_path": "A", "text": "y" * 50_000}],
        },
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "golden.jsonl").write_text("".join(json.dumps(g) + "\n" for g in golden))
    (folder / "hostile.jsonl").write_text("".join(json.dumps(c) + "\n" for c in captures))
    return str(folder / "golden.jsonl"), f"replay:{folder / 'hostile.jsonl'}"


def land_metaeval(lake: str, metaeval_id: str = "me-1") -> None:
    """One meta-evaluation's rows (what `raglake metaeval` lands), written straight into the lake."""
    rows = [
        ("sts-mini", "similarity", "all", "semantic_similarity", "spearman", 0.61, 0.55, 0.67),
        ("sts-mini", "similarity", "all", "answer_correctness_emb", "spearman", 0.58, 0.51, 0.64),
        ("support-mini", "support", "all", "answer_hallucination", "auroc", 0.71, 0.64, 0.78),
    ]
    names = ("dataset", "label_kind", "split", "metric", "statistic", "value", "ci_low", "ci_high")
    columns: dict[str, list[Any]] = {name: [r[i] for r in rows] for i, name in enumerate(names)}
    columns |= {
        "created_at": [dt.datetime(2026, 1, 2, tzinfo=dt.UTC)] * len(rows),
        "n": [200] * len(rows),
        "status": ["ok"] * len(rows),
        "source": ["<b>tests</b>"] * len(rows),
    }
    spec = TABLES["metaeval"]
    full = {name: columns.get(name, [None] * len(rows)) for name in spec.schema.names}
    table: pa.Table = to_arrow(spec, full)
    Lake(lake).write("metaeval", metaeval_id, table, f"m-{metaeval_id}")


@dataclass(frozen=True)
class ViewLake:
    lake: str
    early: str  # basic_search before a, retrieval metrics only (a sparkline has two points)
    a: str  # basic_search, judged
    b: str  # local_search, judged, a minute later: the candidate
    hostile: str


def build_view_lake(folder: Path) -> ViewLake:
    lake = str(folder / "lake")
    early = land(lake, GOLDEN, BASIC, "r-basic-early", minutes=-5, metrics=["recall_any_at_k", "mrr_at_k"])
    with FakeOpenAI(handler=judge_reply) as server:
        server.reply_model, server.fingerprint = "gpt-4o-mini-2024-07-18", "fp_view"
        a = land_judged(lake, BASIC, "r-basic", server, minutes=0)
        b = land_judged(lake, LOCAL, "r-local", server, minutes=1)
    hostile = land(lake, *write_hostile_inputs(folder / "hostile"), "r-hostile", minutes=2, metrics=["recall_any_at_k"])
    land_metaeval(lake)
    return ViewLake(lake, early, a, b, hostile)


if __name__ == "__main__":  # python -m tests.viewkit FOLDER: build one to look at
    import sys

    print(build_view_lake(Path(sys.argv[1])))
