"""answer_hallucination version 2 on hand-built cases: support is checked against the chunks' sentences
(not whole chunks), content words count, per-sentence scores come with the value (both scoring paths),
and the first rule stays reachable as answer_hallucination_chunk_cos."""

from __future__ import annotations

import numpy as np
import pytest
from test_metrics_embedding import StubEmbedder, capture, case, chunks, stub_encoder, unit

from raglake.columnar.batch import ColumnarBatch
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.scoring import score_columnar
from raglake.text.words import content_words, coverage, stem
from tests.rowpath import score_batch

QUESTION = "Which database does Atlas use?"
SUPPORT = "Atlas stores its records in Postgres."  # (1, 0, 0)
OTHER_1 = "The team meets on Mondays."  # (0, 1, 0)
OTHER_2 = "Lunch is served at noon."  # (0, .6, .8)
LONG = f"{OTHER_1} {OTHER_2} {SUPPORT}"  # whole chunk: (.2, .9, .4) normalised, cos to the answer ≈ .2
ANSWER_OK = "Atlas stores records in Postgres."  # (1, 0, 0): the chunk's third sentence says it
ANSWER_BAD = "Atlas moved to Oracle in 2019."  # (.6, 0, .8): cos .6 to OTHER_2... no word in the chunk but Atlas

VECTORS = {
    QUESTION: unit(1, 0, 0),
    SUPPORT: unit(1, 0, 0),
    OTHER_1: unit(0, 1, 0),
    OTHER_2: unit(0, 0.6, 0.8),
    LONG: unit(0.2, 0.9, 0.4),
    ANSWER_OK: unit(1, 0, 0),
    ANSWER_BAD: unit(0.6, 0, 0.8),
}
METRICS = [
    get_metric(n) for n in ("answer_hallucination", "answer_hallucination_score", "answer_hallucination_chunk_cos")
]


def pairs() -> list:
    return [
        (case("ok", QUESTION, None), capture("ok", ANSWER_OK, chunks(LONG))),
        (case("two", QUESTION, None), capture("two", f"{ANSWER_OK} {ANSWER_BAD}", chunks(LONG))),
    ]


def values(batch) -> dict[tuple[str, str], float]:
    s = batch.scores
    return {(c, m): v for c, m, v in zip(s["case_id"], s["metric"], s["value"])}


def test_content_words() -> None:
    assert content_words("It runs on Tuesdays [2].") == ["run", "tuesday"]  # stop words and the citation go
    assert [stem(w) for w in ("pumps", "pumped", "pumping")] == ["pump"] * 3
    assert stem("uses") == "use" and stem("gas") == "gas"  # at least 3 letters stay
    assert coverage(["a", "b", "c", "d"], {"a", "c"}) == 0.5
    assert coverage([], {"a"}) is None


def test_sentences_of_a_chunk_not_the_whole_chunk() -> None:
    got = values(
        score_batch(pairs()[:1], METRICS, ScoringConfig(), encoder=stub_encoder(StubEmbedder(vectors=VECTORS)))
    )
    # the answer's best context sentence is SUPPORT (cos 1); its words atla, store, record, postgre are all there:
    # support = .7 + .3 = 1 → h = 0, not flagged
    assert got["ok", "answer_hallucination"] == 0.0
    assert got["ok", "answer_hallucination_score"] == pytest.approx(0.0, abs=1e-6)
    # the first rule sees only the whole chunk: cos((1,0,0), (.2,.9,.4)/|·|) = .2 / √1.01 ≈ .199 < .4 → flagged
    assert got["ok", "answer_hallucination_chunk_cos"] == 1.0


def test_per_sentence_scores_come_with_the_value_on_both_paths() -> None:
    config = ScoringConfig()
    per_case = score_batch(pairs(), METRICS, config, encoder=stub_encoder(StubEmbedder(vectors=VECTORS)))
    columnar = score_columnar(
        ColumnarBatch.from_models(pairs()), METRICS, config, encoder=stub_encoder(StubEmbedder(vectors=VECTORS))
    )
    for batch in (per_case, columnar):
        rows = batch.tables()["sentence_scores"].to_pylist()
        two = [r for r in rows if r["case_id"] == "two"]
        # only answer_hallucination carries per-sentence rows, one per answer sentence, in order
        assert {r["metric"] for r in rows} == {"answer_hallucination"}
        assert [r["sentence_index"] for r in two] == [0, 1]
        assert [r["sentence"] for r in two] == [ANSWER_OK, ANSWER_BAD]
        bad = two[1]
        # ANSWER_BAD: best context sentence OTHER_2, cos (.6,0,.8)·(0,.6,.8) = .64; words atla, mov, oracle, 2019
        # → only atla is in the chunk: 1/4; support = .7·.64 + .3·.25 = .523 < .7 → flagged, h = .477
        assert bad["best_cos"] == pytest.approx(0.64, abs=1e-6)
        assert bad["coverage"] == pytest.approx(0.25)
        assert bad["value"] == pytest.approx(1 - (0.7 * 0.64 + 0.3 * 0.25), abs=1e-6)
        assert bad["flagged"] is True and bad["best_rank"] == 1
        assert two[0]["flagged"] is False and two[0]["value"] == pytest.approx(0.0, abs=1e-6)
        got = values(batch)
        assert got["two", "answer_hallucination"] == pytest.approx(0.5)  # 1 of 2 sentences
        assert got["two", "answer_hallucination_score"] == pytest.approx(bad["value"], abs=1e-9)  # the max h
        assert batch.tables()["sentence_scores"].schema.names[-1] == "best_rank"  # no scoring id before landing


def test_threshold_moves_the_flags_not_the_scores() -> None:
    loose = score_batch(
        pairs(), METRICS, ScoringConfig(theta_h=0.5), encoder=stub_encoder(StubEmbedder(vectors=VECTORS))
    )
    assert values(loose)["two", "answer_hallucination"] == 0.0  # support .523 ≥ .5
    rows = loose.tables()["sentence_scores"].to_pylist()
    assert not any(r["flagged"] for r in rows)
    assert np.isclose(max(r["value"] for r in rows), 1 - (0.7 * 0.64 + 0.3 * 0.25))


def test_sentence_scores_land_in_the_lake_beside_the_scores(tmp_path) -> None:
    from raglake.lake.query import fetch
    from raglake.pipeline.lakes import open_lake
    from tests.conftest import FIXTURES
    from tests.lakekit import land

    lake = str(tmp_path / "lake")
    golden, replay = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
    land(lake, golden, replay, "r-sentences", metrics=["answer_hallucination", "answer_hallucination_score"])
    con = open_lake(lake).con
    score_sql = "SELECT case_id, value FROM scores WHERE metric = 'answer_hallucination_score' AND status = 'ok'"
    scores = dict(fetch(con, score_sql))
    rows = fetch(
        con,
        "SELECT case_id, max(value), count(*), bool_and(scoring_id IS NOT NULL), any_value(metric_version) "
        "FROM sentence_scores GROUP BY case_id",
    )
    assert rows and {r[0] for r in rows} == set(scores)  # one set of sentences per scored answer
    for case_id, worst, n, has_scoring, version in rows:
        assert worst == pytest.approx(scores[case_id])  # the continuous score is the worst sentence
        assert n >= 1 and has_scoring and version == get_metric("answer_hallucination").version == "3"
