"""BERTScore (METRICS.md §4, seed 004) on the packaged model: agreement with the reference
implementation (the `bert-score` package), edge cases of the NaN policy, long and non-English
texts, and the choice of layer."""

from __future__ import annotations

import math

import pytest

from raglake.errors import ConfigError
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.pipeline.scoring import score_batch
from raglake.schemas import Capture, GoldenCase

BERT_METRICS = ("bert_score_precision", "bert_score_recall", "bert_score_f1")

PAIRS = [
    ("The cat sat on the mat.", "A cat was sitting on the mat."),
    ("Atlas uses Postgres 16 for its database.", "Postgres 16."),
    ("The launch moved to May 12.", "May 12 (moved from March)."),
    ("I don't know.", "The notes do not say."),
    ("Paris is the capital of France.", "France's capital city is Paris."),
    ("Water boils at 100 degrees Celsius at sea level.", "At sea level, water boils at 100 °C."),
    ("He plays the guitar every evening after work.", "Every evening he practises guitar."),
    ("The meeting was cancelled because of the storm.", "Because of the storm, the meeting did not happen."),
    ("Use `git rebase -i HEAD~3` to squash commits.", "Squash the last three commits with an interactive rebase."),
    ("Revenue grew 12.5% year over year in Q3 2024.", "Q3 2024 revenue was up 12.5% YoY."),
    ("Die Katze sitzt auf der Matte.", "The cat sits on the mat."),
    ("猫がマットの上に座っている。", "The cat is sitting on the mat."),
    ("yes", "no"),
    ("Auth and billing block the launch; both are owned by Dana.", "Auth and billing."),
    ("A quick brown fox jumps over the lazy dog!", "The lazy dog was jumped over by a quick brown fox."),
]
CANDS = [c for c, _ in PAIRS]
REFS = [r for _, r in PAIRS]


@pytest.fixture(scope="module")
def encoder():
    from raglake.embed.encoders import default_encoder

    return default_encoder()


@pytest.fixture(scope="module")
def scorer(encoder):
    from raglake.embed.bertscore import BertScorer

    return BertScorer(encoder.embedder, 6)


def _reference(idf: bool):
    import bert_score

    from raglake.embed.encoders import get_embedder

    P, R, F = bert_score.score(
        CANDS,
        REFS,
        model_type=str(get_embedder().path),
        num_layers=6,
        idf=idf,
        lang=None,
        batch_size=8,
        nthreads=0,
        rescale_with_baseline=False,
    )
    return P.tolist(), R.tolist(), F.tolist()


def _disagreements(ref, ours) -> list[str]:
    out = []
    for i, (pair, p, r, f, o) in enumerate(zip(PAIRS, *ref, ours)):
        for name, want, got in (("P", p, o.precision), ("R", r, o.recall), ("F1", f, o.f1)):
            if abs(want - got) > 1e-4:
                out.append(f"pair {i} {pair[0][:30]!r}: {name} bert_score={want:.5f} raglake={got:.5f}")
    return out


def test_agrees_with_the_reference_implementation(scorer) -> None:
    ours = scorer.score(CANDS, REFS)
    assert all(o is not None for o in ours)
    bad = _disagreements(_reference(idf=False), ours)
    assert not bad, "\n".join(bad)


def test_agrees_with_the_reference_implementation_with_idf(scorer) -> None:
    from raglake.embed.bertscore import idf_weights

    ours = scorer.score(CANDS, REFS, idf_weights(scorer.token_ids(REFS)))
    bad = _disagreements(_reference(idf=True), ours)
    assert not bad, "\n".join(bad)


# ---------------------------------------------------------------------------------------------- via score_batch


def _score(encoder, pairs: list[tuple[str, str | None]], config: ScoringConfig = ScoringConfig()):
    batch = score_batch(
        [
            (GoldenCase(id=f"c{i}", question="q?", reference_answer=ref), Capture(case_id=f"c{i}", answer=ans))
            for i, (ans, ref) in enumerate(pairs)
        ],
        [get_metric(m) for m in BERT_METRICS],
        config,
        encoder=encoder,
    )
    s = batch.scores
    return {(s["case_id"][i], s["metric"][i]): {c: s[c][i] for c in s} for i in range(len(s["case_id"]))}


def test_empty_and_whitespace_texts_are_undefined(encoder) -> None:
    rows = _score(
        encoder,
        [
            ("", "Postgres 16."),
            ("  \n\t ", "Postgres 16."),
            ("Postgres 16.", ""),
            ("Postgres 16.", "   "),
            ("Postgres 16.", None),
            ("Postgres 16.", "Postgres 16."),
        ],
    )
    for cid, reason in (
        ("c0", "empty_answer"),
        ("c1", "empty_answer"),
        ("c2", "no_reference"),
        ("c3", "no_reference"),
        ("c4", "no_reference"),
    ):
        for m in BERT_METRICS:
            r = rows[cid, m]
            assert (r["status"], r["reason"]) == ("undefined", reason), (cid, m, r)
            assert math.isnan(r["value"])
    assert all(rows["c5", m]["status"] == "ok" for m in BERT_METRICS)


def test_identical_texts_score_one_and_never_above(encoder) -> None:
    text = "Revenue grew 12.5% year over year in Q3 2024, driven by the new billing plan."
    rows = _score(encoder, [(text, text), ("Die Katze sitzt auf der Matte.", "Die Katze sitzt auf der Matte.")])
    for cid in ("c0", "c1"):
        for m in BERT_METRICS:
            assert rows[cid, m]["status"] == "ok"
            assert rows[cid, m]["value"] == pytest.approx(1.0, abs=1e-6), (cid, m)
            assert rows[cid, m]["value"] <= 1.0, (cid, m)


def test_non_english_text_gives_a_finite_score(encoder) -> None:
    rows = _score(
        encoder,
        [
            ("Die Katze sitzt auf der Matte.", "Eine Katze saß auf der Matte."),
            ("猫がマットの上に座っている。", "猫はマットの上にいます。"),
            ("東京は日本の首都です。", "The capital of Japan is Tokyo."),
        ],
    )
    for cid in ("c0", "c1", "c2"):
        for m in BERT_METRICS:
            r = rows[cid, m]
            assert r["status"] == "ok", (cid, m, r)
            assert math.isfinite(r["value"]) and -1.0 <= r["value"] <= 1.0, (cid, m, r["value"])


def test_a_text_beyond_the_max_sequence_uses_every_token(encoder) -> None:
    filler = " ".join(
        [
            "The finance committee reviewed the quarterly budget figures.",
            "Invoices are filed by the accounting team every Friday.",
            "Office supplies are ordered through the procurement portal.",
            "Travel expenses need a manager's approval before booking.",
        ]
        * 50
    )
    ending = "Penguins waddle across the Antarctic ice to reach their chicks."
    long_cand = f"{filler} {ending}"
    n_tokens = encoder.embedder.count_tokens([long_cand])[0]
    assert n_tokens > 2000 > 7 * encoder.embedder.max_sequence  # far beyond one window
    rows = _score(encoder, [(long_cand, ending), (filler, ending)])
    assert all(rows[c, m]["status"] == "ok" for c in ("c0", "c1") for m in BERT_METRICS)
    with_end, without_end = rows["c0", "bert_score_recall"]["value"], rows["c1", "bert_score_recall"]["value"]
    # the reference's tokens find their matches in the candidate's last sentence, 2,000 tokens in
    assert with_end > 0.6, with_end
    assert with_end > without_end + 0.3, (with_end, without_end)


def test_the_recorded_model_includes_the_layer(encoder) -> None:
    key = encoder.embedder.key
    assert key.startswith("sentence-transformers/all-MiniLM-L6-v2@")
    rows = _score(encoder, [("Postgres 16.", "Atlas uses Postgres 16.")])
    assert {r["embedder"] for r in rows.values()} == {f"{key}:layer6"}  # the model's last layer by default
    rows = _score(encoder, [("Postgres 16.", "Atlas uses Postgres 16.")], ScoringConfig(bertscore_layer=2))
    assert {r["embedder"] for r in rows.values()} == {f"{key}:layer2"}


def test_layer_choice_changes_values_and_is_checked(encoder) -> None:
    pairs = [("He plays the guitar every evening after work.", "Every evening he practises guitar.")]
    default = _score(encoder, pairs)
    layer6 = _score(encoder, pairs, ScoringConfig(bertscore_layer=6))
    layer2 = _score(encoder, pairs, ScoringConfig(bertscore_layer=2))
    for m in BERT_METRICS:
        assert layer6["c0", m]["value"] == default["c0", m]["value"]
        assert abs(layer2["c0", m]["value"] - default["c0", m]["value"]) > 1e-3, m
    for bad in (0, 7, -1):
        with pytest.raises(ConfigError):
            _score(encoder, pairs, ScoringConfig(bertscore_layer=bad))
