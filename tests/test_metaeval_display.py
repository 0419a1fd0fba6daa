"""Issue 27, finding 7: `raglake metaeval` printed 72 rows, dataset names wrapped over two or three lines,
AUROC rows of 0/1 deciders that repeat their balanced accuracy, and semantic_similarity beside
answer_correctness_emb (the registry's `same_as`). Now: the AUROC of a metric whose values are 0 or 1 IS
its balanced accuracy (shown here on the data, value and interval, for both directions of a metric and
both kinds of binary label; a higher-is-better support decider had its decision inverted), the lake keeps
every row and sql/metaeval.sql names what a row repeats, and the CLI prints one line per figure of its
own with every name whole at 120 and at 80 columns (`--all`: every row)."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pytest
from rich.console import Console

from raglake.cli import render
from raglake.cli.metaeval import print_metaeval
from raglake.cli.metaeval_table import STATISTICS
from raglake.lake.query import run_query
from raglake.lake.store import Lake
from raglake.lake.tables import TABLES, to_arrow
from raglake.metaeval.agreement import CaseScore, Settings, dataset_rows
from raglake.metaeval.items import LabelledItem
from raglake.metaeval.plan import item_cases
from raglake.metrics.registry import get_metric
from raglake.pipeline.lakes import open_lake

N = 60
DECIDERS = {  # 0/1 values: (label kind, metric)
    ("support", "answer_hallucination"),  # lower is better: 1 flags the item
    ("support", "faithfulness"),  # higher is better: 0 flags it
    ("correctness", "answer_class_correct"),  # higher is better: 1 says correct
}
SETS = {  # data set -> (label kind, metrics), names as long as the public sets'
    "lfqa_alpaca_wdoc": ("support", ["answer_hallucination", "answer_hallucination_score", "faithfulness"]),
    "evouna_nq": ("correctness", ["answer_class_correct", "answer_correctness_emb", "semantic_similarity"]),
    "stsb": ("similarity", ["answer_correctness_emb", "semantic_similarity", "bert_score_f1"]),
    "ragchecker_completeness": ("preference", ["answer_correctness_emb", "semantic_similarity"]),
}


def _items(name: str, kind: str, rng: np.random.Generator) -> list[LabelledItem]:
    labels = {
        "support": lambda: str(rng.choice(["supported", "not_supported"])),
        "correctness": lambda: str(rng.choice(["correct", "wrong"])),
        "similarity": lambda: float(rng.integers(0, 6)),
        "preference": lambda: float(rng.integers(-2, 3)),
    }[kind]
    b = {"answer_b": "the other answer"} if kind == "preference" else {}
    return [
        LabelledItem(
            id=f"{name}-{i}",
            dataset=name,
            label_kind=kind,
            label=labels(),
            answer=f"{name} answer {i}",
            group=f"g{i // 2}",
            split=("dev", "heldout")[i % 2] if kind == "support" else "all",
            **b,
        )
        for i in range(N)
    ]


def _scores(items: list[LabelledItem], metric: str, rng: np.random.Generator) -> dict:
    """A value per case that agrees with the labels most of the time: 0/1 for a decider."""
    m = get_metric(metric)
    out = {}
    for item in items:
        positive = float(item.positive) if item.label_kind in ("support", "correctness") else float(item.label) / 5
        for cid, _, _ in item_cases(item):
            raw = positive if rng.random() < 0.8 else rng.random()
            if (item.label_kind, metric) in DECIDERS:
                raw = float(raw >= 0.5)
            # a lower-is-better support metric is high on not_supported; a higher-is-better one low
            flip = (item.label_kind == "support") == (m.higher_is_better is not False)
            value = 1.0 - raw if flip else raw
            out[cid, metric] = CaseScore(value, "ok", None, m.version, None, None)
    return out


def _rows(seed: int = 3) -> list[dict]:
    rng = np.random.default_rng(seed)
    common = {"created_at": dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), "n_total": N, "sample_seed": 0}
    rows = []
    for name, (kind, metrics) in SETS.items():
        items = _items(name, kind, rng)
        scores = {k: v for m in metrics for k, v in _scores(items, m, rng).items()}
        rows += dataset_rows(name, items, [get_metric(m) for m in metrics], scores, Settings(300, 0, common))
    return rows


@pytest.fixture(scope="module")
def landed(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[dict]]:
    lake = str(tmp_path_factory.mktemp("metaeval_display") / "lake")
    rows = _rows()
    names = TABLES["metaeval"].schema.names
    Lake(lake).write(
        "metaeval", "m-1", to_arrow(TABLES["metaeval"], {c: [r.get(c) for r in rows] for c in names}), "m-1"
    )
    return lake, rows


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_the_auroc_of_a_0_1_decider_is_its_balanced_accuracy(seed: int) -> None:
    """TPR·(1 − FPR) + ½(TPR·FPR + (1 − TPR)(1 − FPR)) = ½(TPR + TNR): the same figure and the same
    interval (the same bootstrap draws), for a lower- and a higher-is-better metric and for both kinds of
    binary label. Before the fix a higher-is-better support decider's balanced accuracy was 1 − its AUROC,
    and a correctness decider had no balanced accuracy at all."""
    rows = {(r["dataset"], r["split"], r["metric"], r["statistic"]): r for r in _rows(seed)}
    checked = 0
    for (dataset, split, metric, statistic), auroc in rows.items():
        if statistic != "auroc" or (SETS[dataset][0], metric) not in DECIDERS:
            continue
        decided = rows[dataset, split, metric, "balanced_accuracy"]
        assert auroc["value"] is not None and 0.6 < auroc["value"] < 1, (metric, split)  # a real figure
        for key in ("value", "ci_low", "ci_high"):
            assert decided[key] == pytest.approx(auroc[key], abs=1e-12), (dataset, split, metric, key)
        checked += 1
    assert checked == 2 * 3 + 1  # two support deciders × (all, dev, heldout), one correctness decider


def test_the_lake_keeps_every_row_and_the_sql_names_what_each_repeats(landed) -> None:
    lake, rows = landed
    got = run_query(open_lake(lake).con, "metaeval", metaeval_id="").to_pylist()
    assert len(got) == len(rows)  # every row landed and read back
    repeats = {(r["dataset"], r["split"], r["metric"], r["statistic"]): r["repeats"] for r in got}
    for (dataset, split, metric, statistic), what in repeats.items():
        if statistic == "auroc" and (SETS[dataset][0], metric) in DECIDERS:
            assert what == "balanced_accuracy", (dataset, split, metric)
        elif metric == "semantic_similarity":  # measured beside answer_correctness_emb on every set here
            assert what == "answer_correctness_emb", (dataset, statistic)
        else:
            assert what is None, (dataset, split, metric, statistic)
    assert repeats["lfqa_alpaca_wdoc", "all", "answer_hallucination_score", "auroc"] is None  # continuous


def _printed(width: int, lake: str, every: bool = False) -> list[str]:
    saved = render.console
    render.console = Console(width=width, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    try:
        print_metaeval(lake, "m-1", every)
        return render.console.export_text().splitlines()
    finally:
        render.console.file.close()
        render.console = saved


@pytest.mark.parametrize("width", [120, 80])
def test_one_line_per_figure_of_its_own_every_name_whole(landed, width: int) -> None:
    lake, rows = landed
    lines = _printed(width, lake)
    assert all(len(line.rstrip()) <= width for line in lines), width
    shown = [r for r in rows if not _repeats(r)]
    for r in shown:  # metric, statistic and figure on one line: nothing wrapped
        cells = (r["metric"], STATISTICS[r["statistic"]], f"{r['value']:.3f}", f"[{r['ci_low']:.3f}, ")
        assert sum(all(c in line for c in cells) for line in lines) >= 1, (r["dataset"], r["metric"], r["statistic"])
    for name in SETS:  # each data set × split once, as a heading, its name whole
        splits = {r["split"] for r in rows if r["dataset"] == name}
        assert sum(line.startswith(f"{name} · ") for line in lines) == len(splits), name
    figures = [line for line in lines if line.startswith("  ") and line.split()[0] in {r["metric"] for r in rows}]
    assert len(figures) == len(shown)  # one line per figure, none for a repeat
    assert not any("semantic_similarity" in line for line in figures)
    assert not any("answer_hallucination " in line and "AUROC" in line for line in figures)
    footer = " ".join(" ".join(lines[len(lines) - 3 :]).split())
    assert "semantic_similarity" in footer and "--all shows every row" in footer


def _repeats(r: dict) -> bool:
    return (r["statistic"] == "auroc" and (SETS[r["dataset"]][0], r["metric"]) in DECIDERS) or (
        r["metric"] == "semantic_similarity"
    )


def test_all_prints_every_row_and_says_what_each_repeats(landed) -> None:
    lake, rows = landed
    lines = _printed(120, lake, every=True)
    figures = [line for line in lines if line.startswith("  ") and line.split()[0] in {r["metric"] for r in rows}]
    assert len(figures) == len(rows)
    assert any("semantic_similarity" in line and "repeats answer_correctness_emb" in line for line in figures)
    assert any(
        "answer_hallucination " in line and "AUROC" in line and "repeats bal. accuracy" in line for line in lines
    )
    assert not any("--all shows every row" in line for line in lines)
