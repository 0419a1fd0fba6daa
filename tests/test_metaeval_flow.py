"""`raglake metaeval` end to end on a tiny labelled file (all four kinds of label): the flow lands one row
per data set × split × metric × statistic, and each figure equals the one computed here from the
packaged model's vectors with plain numpy (ranks, pair counts, correlation) — not with raglake's code."""

from __future__ import annotations

import math
from itertools import product
from pathlib import Path

import numpy as np
import pytest

from raglake.embed.encoders import get_embedder
from raglake.lake.query import run_query
from raglake.metaeval.items import read_items
from raglake.metaeval.plan import MetaevalSettings
from raglake.pipeline.lakes import open_lake
from raglake.schemas import Capture, GoldenCase
from tests.conftest import FIXTURES
from tests.rowpath import score_one

pytestmark = [pytest.mark.flow, pytest.mark.usefixtures("prefect_harness")]
TINY = FIXTURES / "metaeval_tiny.jsonl"


def cos(a: str, b: str) -> float:
    v = get_embedder().model.encode([a, b], normalize_embeddings=True)
    return float(v[0] @ v[1])


def ranks(x: list[float]) -> np.ndarray:
    """Average ranks, by counting (independent of raglake's rankdata)."""
    return np.array([sum(y < v for y in x) + (sum(y == v for y in x) + 1) / 2 for v in x])


def pair_auroc(pos: list[float], neg: list[float]) -> float:
    return float(np.mean([1.0 if p > n else 0.5 if p == n else 0.0 for p, n in product(pos, neg)]))


@pytest.fixture(scope="module")
def metaeval_lake(tmp_path_factory: pytest.TempPathFactory) -> str:
    from raglake.flows.metaeval import metaeval

    lake = str(tmp_path_factory.mktemp("metaeval") / "lake")
    settings = MetaevalSettings(data=[str(TINY)], lake=lake, resamples=200, max_items=None, device="cpu")
    assert metaeval(settings).startswith("m-")
    return lake


@pytest.fixture(scope="module")
def landed(metaeval_lake: str) -> dict[tuple[str, str, str, str], dict]:
    rows = run_query(open_lake(metaeval_lake).con, "metaeval", metaeval_id="").to_pylist()
    assert rows and len({r["metaeval_id"] for r in rows}) == 1
    return {(r["dataset"], r["split"], r["metric"], r["statistic"]): r for r in rows}


def test_similarity_spearman_and_pearson(landed: dict) -> None:
    items = [i for i in read_items(TINY) if i.dataset == "tiny_sts"]
    sim = [max(0.0, cos(i.answer, i.reference)) for i in items]
    labels = [i.label for i in items]
    spearman = np.corrcoef(ranks(sim), ranks(labels))[0, 1]
    row = landed["tiny_sts", "all", "semantic_similarity", "spearman"]
    assert row["value"] == pytest.approx(spearman, abs=1e-6)
    assert landed["tiny_sts", "all", "semantic_similarity", "pearson"]["value"] == pytest.approx(
        np.corrcoef(sim, labels)[0, 1], abs=1e-4
    )
    assert row["n"] == 6 and row["n_failed"] == 0 and row["status"] == "ok"
    assert row["ci_low"] <= row["ci_high"] and row["resamples"] == 200


def test_support_auroc_and_balanced_accuracy_with_splits(landed: dict) -> None:
    items = [i for i in read_items(TINY) if i.dataset == "tiny_support"]
    # the first rule, computed here: a sentence is flagged when its best cos to a whole context is < 0.4
    flags = [max(cos(i.answer, c) for c in i.contexts) < 0.4 for i in items]
    bad = [i.label == "not_supported" for i in items]
    tpr = np.mean([f for f, b in zip(flags, bad) if b])
    tnr = np.mean([not f for f, b in zip(flags, bad) if not b])
    row = landed["tiny_support", "all", "answer_hallucination_chunk_cos", "balanced_accuracy"]
    assert row["value"] == pytest.approx((tpr + tnr) / 2)
    assert row["n"] == 8 and row["n_positive"] == 3
    # the continuous score: AUROC by counting pairs (not supported above supported)
    scores = [
        score_one(GoldenCase(id="x", question=i.question), _capture(i), "answer_hallucination_score").value
        for i in items
    ]
    expected = pair_auroc([s for s, b in zip(scores, bad) if b], [s for s, b in zip(scores, bad) if not b])
    assert landed["tiny_support", "all", "answer_hallucination_score", "auroc"]["value"] == pytest.approx(expected)
    # the items' own dev / heldout halves get rows of their own
    held = [(s, b) for s, b, i in zip(scores, bad, items) if i.split == "heldout"]
    got = landed["tiny_support", "heldout", "answer_hallucination_score", "auroc"]
    assert got["n"] == 3
    assert got["value"] == pytest.approx(pair_auroc([s for s, b in held if b], [s for s, b in held if not b]))
    assert ("tiny_support", "dev", "answer_hallucination_score", "auroc") in landed


def _capture(item) -> Capture:
    retrieved = [{"rank": n + 1, "rel_path": f"c/{n}", "text": t} for n, t in enumerate(item.contexts)]
    return Capture(case_id="x", answer=item.answer, retrieved=retrieved)


def test_correctness_without_a_judge_is_skipped_not_zero(landed: dict) -> None:
    for statistic in ("auroc", "accuracy", "kappa"):
        row = landed["tiny_qa", "all", "answer_class_correct", statistic]
        assert (row["status"], row["reason"]) == ("skipped", "no_judge")
        assert row["value"] is None and row["n"] == 0 and row["n_failed"] == 6
    items = [i for i in read_items(TINY) if i.dataset == "tiny_qa"]
    c = [cos(i.answer, i.reference) for i in items]
    ok = [i.label == "correct" for i in items]
    expected = pair_auroc([v for v, o in zip(c, ok) if o], [v for v, o in zip(c, ok) if not o])
    assert landed["tiny_qa", "all", "answer_correctness_emb", "auroc"]["value"] == pytest.approx(expected, abs=1e-6)


def test_preference_pearson_of_the_difference(landed: dict) -> None:
    items = [i for i in read_items(TINY) if i.dataset == "tiny_pref"]
    diff = [cos(i.answer_b, i.reference) - cos(i.answer, i.reference) for i in items]
    row = landed["tiny_pref", "all", "answer_correctness_emb", "pearson"]
    assert row["value"] == pytest.approx(np.corrcoef(diff, [i.label for i in items])[0, 1], abs=1e-4)
    assert row["n"] == 6  # one row per annotation; the pairs' two annotations move together in the bootstrap
    assert not math.isnan(row["ci_low"])


def test_the_command_line_prints_a_landed_metaeval_and_exports_items(
    metaeval_lake: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from raglake.cli import app, render

    monkeypatch.setattr(render.console, "width", 250)  # the console's width is fixed when it is made

    shown = CliRunner().invoke(app, ["metaeval", "--show", "latest", "--lake", metaeval_lake])
    assert shown.exit_code == 0, shown.output
    assert "tiny_support" in shown.output and "answer_hallucination_score" in shown.output
    assert "skipped" in shown.output  # the judge metrics, without a judge
    out = tmp_path / "export"
    exported = CliRunner().invoke(app, ["metaeval", "--data", str(TINY), "--export", str(out)])
    assert exported.exit_code == 0, exported.output
    assert sorted(p.name for p in out.iterdir()) == [
        "tiny_pref.jsonl",
        "tiny_qa.jsonl",
        "tiny_sts.jsonl",
        "tiny_support.jsonl",
    ]
    assert len(read_items(out / "tiny_pref.jsonl")) == 6


def test_the_printed_table_keeps_every_figure_whole_at_the_pipe_width(
    metaeval_lake: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Piped output (120 columns): the figures and intervals are never cut to an ellipsis, the judge
    metrics that were skipped are one line, not a row each, and a row that repeats another (sql/metaeval.sql's
    `repeats`) is left out."""
    from typer.testing import CliRunner

    from raglake.cli import app, render

    monkeypatch.setattr(render.console, "width", render.PIPE_WIDTH)
    shown = CliRunner().invoke(app, ["metaeval", "--show", "latest", "--lake", metaeval_lake])
    assert shown.exit_code == 0, shown.output
    q = open_lake(metaeval_lake)
    rows = run_query(q.con, "metaeval", metaeval_id="").to_pylist()
    ok = [r for r in rows if r["status"] == "ok" and r["value"] is not None and not r["repeats"]]
    skipped = sorted({r["metric"] for r in rows if r["status"] == "skipped"})
    assert ok and skipped
    lines = [line.split() for line in shown.output.splitlines()]
    for r in ok:  # one line holds the metric, its figure and its interval
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]".split() if r["ci_low"] is not None else []
        assert any(w[:1] == [r["metric"]] and w[-3:] == [f"{r['value']:.3f}", *ci][-3:] for w in lines), r
    table = shown.output[: shown.output.index("skipped (no judge configured)")]
    assert "skipped" not in table
    assert f"skipped (no judge configured): {', '.join(skipped)}" in " ".join(shown.output.split())


def test_on_the_pipeline_s_own_values_a_0_1_decider_s_auroc_is_its_balanced_accuracy(metaeval_lake: str) -> None:
    """The metrics that decide (answer_hallucination at θh, the chunk-cosine rule) on the tiny support set,
    scored by the flow: AUROC and balanced accuracy are one figure with one interval, the lake keeps both and
    the SQL marks the AUROC as repeating it."""
    rows = run_query(open_lake(metaeval_lake).con, "metaeval", metaeval_id="").to_pylist()
    by = {(r["dataset"], r["split"], r["metric"], r["statistic"]): r for r in rows}
    deciders = [k for k in by if k[3] == "balanced_accuracy" and by[k]["value"] is not None]
    assert {k[2] for k in deciders} >= {"answer_hallucination", "answer_hallucination_chunk_cos"}
    for dataset, split, metric, _ in deciders:
        auroc, decided = by[dataset, split, metric, "auroc"], by[dataset, split, metric, "balanced_accuracy"]
        for key in ("value", "ci_low", "ci_high"):
            assert auroc[key] == pytest.approx(decided[key], abs=1e-12), (split, metric, key)
        assert auroc["repeats"] == "balanced_accuracy" and decided["repeats"] is None
    assert by["tiny_support", "all", "answer_hallucination_score", "auroc"]["repeats"] is None


def test_the_report_has_a_section_for_the_latest_metaeval(metaeval_lake: str) -> None:
    from raglake.report import gather
    from raglake.report.html import render
    from tests.lakekit import land

    golden, replay = str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}"
    run_id = land(metaeval_lake, golden, replay, "r-with-metaeval", metrics=["mrr_at_k"])
    data = gather(open_lake(metaeval_lake), run_id, worst=0, n_boot=200)
    assert {r["split"] for r in data.metaeval} == {"all", "heldout"}  # dev rows are left to the CLI and SQL
    assert data.metaeval and not any(r["repeats"] for r in data.metaeval)  # the AUROC of a decider: its BA
    assert {(r["metric"], r["statistic"]) for r in data.metaeval} >= {("answer_hallucination", "balanced_accuracy")}
    html = render(data)
    assert 'id="metaeval"' in html and "tiny_support" in html and "answer_hallucination_score" in html


WRONG_ANSWERS = ("Marlowe", "six legs")  # the fake judge calls these WRONG; it misjudges "Lyon" as CORRECT


def _judge(body: dict) -> object:
    from tests.fake_openai import canned_reply, ok, prompt_id_of

    if prompt_id_of(body) == "answer_class":
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return ok({"class": "WRONG" if any(w in user for w in WRONG_ANSWERS) else "CORRECT"})
    return canned_reply(body)


def test_a_judge_is_measured_against_the_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from raglake.flows.metaeval import metaeval
    from tests.fake_openai import FakeOpenAI

    lake = str(tmp_path / "lake")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-metaeval-test")
    with FakeOpenAI(handler=_judge) as server:
        settings = MetaevalSettings(
            data=[str(TINY)],
            datasets=["tiny_qa"],
            metrics=["answer_class_correct", "semantic_similarity"],
            lake=lake,
            resamples=200,
            device="cpu",
            judge={"base_url": server.url, "model": "fake-judge", "backoff_s": 0.01},
        )
        metaeval(settings)
    rows = {
        (r["metric"], r["statistic"]): r for r in run_query(open_lake(lake).con, "metaeval", metaeval_id="").to_pylist()
    }
    # labels correct, wrong × 3; the judge says CORRECT, WRONG, CORRECT, CORRECT (Lyon), CORRECT, WRONG
    y, pred = [1, 0, 1, 0, 1, 0], [1, 0, 1, 1, 1, 0]
    p_o = np.mean(np.equal(y, pred))
    p_e = np.mean(y) * np.mean(pred) + (1 - np.mean(y)) * (1 - np.mean(pred))
    assert rows["answer_class_correct", "accuracy"]["value"] == pytest.approx(5 / 6)
    assert rows["answer_class_correct", "kappa"]["value"] == pytest.approx((p_o - p_e) / (1 - p_e))  # 2/3
    assert rows["answer_class_correct", "kappa"]["judge_model"] == "fake-judge"
    assert rows["answer_class_correct", "auroc"]["value"] == pytest.approx((1 + 2 / 3) / 2)  # TPR 1, TNR 2/3
    assert rows["answer_class_correct", "balanced_accuracy"]["value"] == pytest.approx((1 + 2 / 3) / 2)  # the same
    assert all(r["status"] == "ok" and r["n"] == 6 for r in rows.values())
