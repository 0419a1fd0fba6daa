"""The embedding stage of the `evaluate` flow under the session's Prefect test harness: the run and
every embedding score carry the embedder's key, every distinct text is encoded once, and a repeated
run or a re-scoring of the stored run encodes nothing and reproduces the scores."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from raglake.lake.query import fetch
from raglake.pipeline.lakes import open_lake
from raglake.pipeline.settings import RunSettings

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]

VECTOR_METRICS = [
    "context_relevance",
    "context_sufficiency",
    "answer_relevance_emb",
    "answer_correctness_emb",
    "answer_hallucination",
    "semantic_similarity",
]
METRICS = [*VECTOR_METRICS, "bert_score_f1"]
SCORING = {"theta_s": 0.45, "theta_h": 0.35}

GOLDEN = [
    {
        "id": "e1",
        "question": "Which database does Atlas use?",
        "reference_answer": "Atlas stores its data in Postgres 16.",
    },
    {"id": "e2", "question": "When is the launch?", "reference_answer": "The launch is on May 12."},
    {
        "id": "e3",
        "question": "What is my bank password?",
        "reference_answer": "The notes do not say.",
        "answerable": False,
    },
    {"id": "e4", "question": "Who owns billing?", "reference_answer": "Dana owns billing."},
]
SHARED_CHUNK = "We run Postgres 16 for Atlas."
CAPTURES = [
    {
        "case_id": "e1",
        "method": "m",
        "answer": "Atlas uses Postgres 16. The database runs on a dedicated server.",
        "abstained": False,
        "retrieved": [
            {"rank": 1, "rel_path": "work/atlas.md", "heading_path": "Atlas > Database", "text": SHARED_CHUNK},
            {"rank": 2, "rel_path": "work/team.md", "heading_path": "Team", "text": "The Atlas team meets on Mondays."},
        ],
    },
    {
        "case_id": "e2",
        "method": "m",
        "answer": "The launch moved to May 12.",
        "abstained": False,
        "retrieved": [
            {
                "rank": 1,
                "rel_path": "work/launch.md",
                "heading_path": "Launch",
                "text": "The launch moved from March to May 12.",
            },
            {"rank": 2, "rel_path": "work/atlas.md", "heading_path": "Atlas > Database", "text": SHARED_CHUNK},
        ],
    },
    {
        "case_id": "e3",
        "method": "m",
        "answer": "I could not find this in the notes.",
        "abstained": True,
        "retrieved": [],
    },
    {"case_id": "e4", "method": "m", "status": "error", "error": "HTTP 502", "answer": "", "retrieved": []},
]
# distinct texts: e1 question, answer, its 2 sentences, reference, 2 chunks (7); e2 question, answer (= its one
# sentence), reference, 1 new chunk (4); e3 question, answer, reference (3); e4 failed (0)
DISTINCT = 14


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch) -> tuple[str, str]:
    # a vector cache of this test's own, so the first run's encoding count is exact
    monkeypatch.setenv("RAGLAKE_CACHE", str(tmp_path / "cache"))
    return _write(tmp_path / "golden.jsonl", GOLDEN), _write(tmp_path / "captures.jsonl", CAPTURES)


def _scores(con, run_id: str) -> dict[tuple[str, str], tuple]:
    rows = fetch(
        con,
        "SELECT case_id, metric, value, status, reason, embedder FROM scores "
        "WHERE run_id = $r AND metric IN (SELECT metric FROM metric_registry WHERE family = 'embedding')",
        r=run_id,
    )
    return {(r[0], r[1]): r[2:] for r in rows}


def _embedding_texts(con, run_id: str) -> dict[str, float]:
    return dict(
        fetch(con, "SELECT stage, value FROM run_metrics WHERE run_id = $r AND metric = 'embedding_texts'", r=run_id)
    )


def _same(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        (va, sa, ra, ea), (vb, sb, rb, eb) = a[k], b[k]
        if (sa, ra, ea) != (sb, rb, eb):
            return False
        if not (va == vb or (math.isnan(va) and math.isnan(vb))):
            return False
    return True


def test_embedding_stage_encodes_once_and_rescoring_encodes_nothing(inputs, lake_dir: str, monkeypatch) -> None:
    from raglake.embed.encoders import ENCODERS, get_embedder
    from raglake.flows.evaluate import evaluate

    golden, captures = inputs
    first = evaluate(
        RunSettings(golden=golden, target=f"replay:{captures}", lake=lake_dir, metrics=METRICS, scoring=SCORING)
    )
    con = open_lake(lake_dir).con

    key = fetch(con, "SELECT embedder FROM runs WHERE run_id = $r", r=first)[0][0]
    assert re.fullmatch(r"sentence-transformers/all-MiniLM-L6-v2@[0-9a-f]{16}", key), key
    assert key == get_embedder().key
    config = json.loads(fetch(con, "SELECT config_json FROM runs WHERE run_id = $r", r=first)[0][0])
    assert (config["theta_s"], config["theta_h"]) == (0.45, 0.35)

    scores = _scores(con, first)
    assert {m for _, m in scores} == set(METRICS)
    assert len(scores) == len(GOLDEN) * len(METRICS)
    for m in METRICS:
        ok = [v for (c, mm), v in scores.items() if mm == m and v[1] == "ok"]
        assert ok, f"no ok row for {m}"
        want = f"{key}:layer6" if m == "bert_score_f1" else key
        assert {v[3] for v in ok} == {want}, m
    assert all(v[1:3] == ("undefined", "capture_failed") for (c, _), v in scores.items() if c == "e4")
    assert scores["e3", "answer_relevance_emb"][1:3] == ("undefined", "abstained")
    assert scores["e3", "context_relevance"][1:3] == ("undefined", "no_chunks")

    assert _embedding_texts(con, first) == {"distinct": DISTINCT, "encoded": DISTINCT}
    stages = dict(
        fetch(con, "SELECT stage, value FROM run_metrics WHERE run_id = $r AND metric = 'stage_seconds'", r=first)
    )
    assert 0 < stages["embedding_encode"] <= stages["embedding"]  # the model's part of the stage, recorded

    # the same inputs again: a new run, nothing encoded, the same scores
    second = evaluate(
        RunSettings(golden=golden, target=f"replay:{captures}", lake=lake_dir, metrics=METRICS, scoring=SCORING)
    )
    assert second != first
    con = open_lake(lake_dir).con
    assert fetch(con, "SELECT embedder FROM runs WHERE run_id = $r", r=second)[0][0] == key
    assert _embedding_texts(con, second) == {"distinct": DISTINCT, "encoded": 0}
    assert _same(_scores(con, second), scores)

    # re-scoring the stored run, with a fresh encoder (as in a new process): the vectors come from disk
    ENCODERS.clear()
    third = evaluate(
        RunSettings(golden=golden, target=f"replay-run:{first}", lake=lake_dir, metrics=METRICS, scoring=SCORING)
    )
    assert third not in (first, second)
    con = open_lake(lake_dir).con
    assert fetch(con, "SELECT embedder FROM runs WHERE run_id = $r", r=third)[0][0] == key
    assert _embedding_texts(con, third) == {"distinct": DISTINCT, "encoded": 0}
    assert _same(_scores(con, third), scores)
