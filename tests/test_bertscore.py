"""BERTScore (METRICS.md §4, seed 004) on the packaged model: agreement with the reference
implementation (the `bert-score` package) run without padding, the reference's padding artifact,
edge cases of the NaN policy, long and non-English texts, and the choice of layer."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raglake.errors import ConfigError
from raglake.metrics.context import ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from tests.rowpath import score_batch

BERT_METRICS = ("bert_score_precision", "bert_score_recall", "bert_score_f1")

SHORT = [
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
LONG_A = (
    "The Atlas platform team met on Tuesday to review the migration plan for the billing service. "
    "The current system runs on Postgres 12 and a set of cron jobs that export invoices every night. "
    "Dana proposed moving to Postgres 16, replacing the cron jobs with a queue consumer, and adding "
    "idempotency keys so that a retried export never produces a duplicate invoice. Sam raised the risk "
    "that the finance team's reports read the old tables directly; the group agreed to keep a read-only "
    "view with the old column names for one quarter. The launch depends on auth and billing, and both "
    "are owned by Dana; the target date moved from March to May 12 because the security review found "
    "two open issues in the token refresh flow. Priya will write the runbook for the cut-over weekend, "
    "including the rollback steps, the order in which the consumers are switched, and the checks the "
    "on-call engineer runs before the old cron jobs are turned off for good."
)
LONG_B = (
    "Billing moves from Postgres 12 to Postgres 16, nightly cron exports become a queue consumer with "
    "idempotency keys, and a read-only compatibility view keeps the finance reports working for a quarter. "
    "The launch, blocked by auth and billing (both Dana's), slipped from March to May 12 after the security "
    "review found problems with token refresh."
)
# long texts: far longer than a sentence, but within one window of the model (254 tokens), where the
# reference (which truncates at 512) and raglake (which windows past 254) read the same tokens
LONG = [(LONG_A, LONG_B), (LONG_B, "Postgres 16."), ("Postgres 16.", LONG_A)]
# pairs where some token's best match is negative (MiniLM's token vectors can point away from every
# token of the other text): the pair the reference's padding changes
NEGATIVE = [
    ("zzz", "Die Katze sitzt auf der Matte."),
    ("1 2 3", "Auth and billing block the launch; both are owned by Dana."),
]
PAIRS = SHORT + LONG + NEGATIVE
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


def _reference(idf: bool, batch_size: int = 1):
    """The `bert-score` package on PAIRS with the same model and layer; batch_size 1 pads nothing."""
    import bert_score

    from raglake.embed.encoders import get_embedder

    P, R, F = bert_score.score(
        CANDS,
        REFS,
        model_type=str(get_embedder().path),
        num_layers=6,
        idf=idf,
        lang=None,
        batch_size=batch_size,
        nthreads=0,
        rescale_with_baseline=False,
    )
    return P.tolist(), R.tolist(), F.tolist()


def _disagreements(ref, ours, tol: float = 1e-6) -> list[str]:
    out = []
    for i, (pair, p, r, f, o) in enumerate(zip(PAIRS, *ref, ours)):
        for name, want, got in (("P", p, o.precision), ("R", r, o.recall), ("F1", f, o.f1)):
            if abs(want - got) > tol:
                out.append(f"pair {i} {pair[0][:30]!r}: {name} bert_score={want:.7f} raglake={got:.7f}")
    return out


def _best_matches(scorer, cand: str, ref: str) -> tuple[np.ndarray, np.ndarray]:
    """Each candidate token's best cosine over the reference's rows, and each reference token's over the
    candidate's ([CLS]/[SEP] are matrix rows, as in the reference; their own best matches are left out)."""
    (c_vecs, c_special), (r_vecs, r_special) = scorer.embed_tokens(scorer.token_ids([cand, ref]))
    sim = c_vecs @ r_vecs.T
    return sim.max(axis=1)[~c_special], sim.max(axis=0)[~r_special]


def test_the_test_pairs_cover_long_texts_and_negative_best_matches(scorer) -> None:
    lengths = [len(ids) for ids in scorer.token_ids([LONG_A, LONG_B])]
    assert lengths[0] > 180 and lengths[1] > 60 and max(lengths) <= scorer.window, (lengths, scorer.window)
    for cand, ref in NEGATIVE:
        p_best, r_best = _best_matches(scorer, cand, ref)
        assert min(p_best.min(), r_best.min()) < 0, (cand, ref)


def test_agrees_with_the_reference_run_without_padding(scorer) -> None:
    """bert-score at batch size 1 (nothing padded) equals raglake to 1e-6 on short, long and
    negative-best-match pairs."""
    ours = scorer.score(CANDS, REFS)
    assert all(o is not None for o in ours)
    bad = _disagreements(_reference(idf=False), ours)
    assert not bad, "\n".join(bad)


def test_agrees_with_the_reference_run_without_padding_with_idf(scorer) -> None:
    from raglake.embed.bertscore import idf_weights

    ours = scorer.score(CANDS, REFS, idf_weights(scorer.token_ids(REFS)))
    bad = _disagreements(_reference(idf=True), ours)
    assert not bad, "\n".join(bad)


def test_the_references_padding_floors_negative_best_matches_at_zero(scorer) -> None:
    """The artifact docs/bertscore.md describes: batched, bert-score pads a short text to the longest in
    its batch and lets the padded positions into the max with similarity 0, so a token whose best match
    is negative counts as 0. Its recall for ("zzz", "Die Katze sitzt auf der Matte.") is then the mean of
    the floored best matches, and raglake's (and the reference's unpadded value) the mean of the true ones."""
    ours = scorer.score(CANDS, REFS)
    batched = _reference(idf=False, batch_size=64)
    i = PAIRS.index(NEGATIVE[0])
    _, r_best = _best_matches(scorer, *NEGATIVE[0])
    assert ours[i].recall == pytest.approx(float(r_best.mean()), abs=1e-6)
    assert batched[1][i] == pytest.approx(float(np.maximum(r_best, 0).mean()), abs=1e-6)
    assert batched[1][i] - ours[i].recall > 1e-3  # the floor moves the value, by about 5e-3 here
    # a pair with no negative best match is untouched by the padding
    assert batched[1][0] == pytest.approx(ours[0].recall, abs=1e-6)


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
