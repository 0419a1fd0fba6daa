"""What a newcomer reads first after `raglake run` / `raglake compare` and in the report (issue 27): the
verdict on top in one or two lines, one kind of interval per place and labelled, the same numbers in the
CLI, the report and the API; intervals inside what the metric can take; slice labels and chart captions
that say what they are; the cases of every metric that regressed; one metric shown for two that are the
same figure; each note once."""

from __future__ import annotations

import os
import re

import pytest
from rich.console import Console

from raglake.api.lake import LakeFrames
from raglake.cli import render
from raglake.cli.common import print_comparison, print_run_summary, print_runs
from raglake.metrics.registry import get_metric
from raglake.pipeline.lakes import open_lake
from raglake.report.data import gather
from raglake.report.format import fold_unscored, slice_label
from raglake.report.html import render as render_html
from tests.conftest import FIXTURES
from tests.lakekit import land
from tests.samplepair import SamplePair, land_sample_pair

WIDTH = 120


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> SamplePair:
    return land_sample_pair(tmp_path_factory.mktemp("sample_pair"))


def printed(fn, *args, **kwargs) -> list[str]:
    """What `fn` prints on the CLI's console at 120 columns, as lines."""
    saved = render.console
    render.console = Console(width=WIDTH, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    try:
        fn(*args, **kwargs)
        return render.console.export_text().splitlines()
    finally:
        render.console.file.close()
        render.console = saved


def _interval(text: str, metric: str) -> str:
    """The `[low, high]` printed right after `metric`'s difference on a line."""
    found = re.search(rf"{metric} ↑?\s*[+-]?\d\.\d{{3}} \(95% CI (\[[^\]]+\])", text)
    assert found, text
    return found.group(1)


# --- finding 3: the verdict first, one kind of interval, labelled ---------------------------------------


def test_two_runs_print_the_verdict_first_with_the_tables_interval(pair):
    lines = printed(print_runs, open_lake(pair.lake), [pair.a, pair.b])
    top = " ".join(" ".join(lines[:2]).split())
    assert lines[0].startswith("verdict"), lines[:3]
    assert "answer_relevance_emb" in top and "local_search" in top and "basic_search" in top
    rows = {r["metric"]: r for r in open_lake(pair.lake).compare(pair.a, pair.b) if r["dimension"] == "all"}
    row = rows["answer_relevance_emb"]
    table_interval = f"[{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]"
    assert _interval(top, "answer_relevance_emb") == table_interval  # the per-slice 95% CI, as the table's
    assert f"[{row['fdr_low']:+.3f}" not in " ".join(lines)  # never the FDR-adjusted one, unlabelled
    # the report and the API give the same interval for the same row
    data = gather(open_lake(pair.lake), pair.b, against=pair.a)
    (overall,) = [r for r in data.comparison.overall if r["metric"] == "answer_relevance_emb"]
    assert (overall["ci_low"], overall["ci_high"]) == (row["ci_low"], row["ci_high"])
    frame = LakeFrames(pair.lake).compare(pair.a, pair.b)
    api = frame[frame["metric"] == "answer_relevance_emb"].iloc[0]
    assert (api["ci_low"], api["ci_high"]) == (row["ci_low"], row["ci_high"]) and api["verdict"] == "worse"


def test_a_first_run_and_an_unchanged_rerun_say_so_on_the_first_line(pair):
    first = printed(print_runs, open_lake(pair.lake), [pair.b])  # local_search's only run
    assert first[0].startswith("verdict") and "first run" in first[0], first[:3]
    again = printed(print_runs, open_lake(pair.lake), [pair.a_again])  # basic_search again, same captures
    assert again[0].startswith("verdict") and "no real difference" in " ".join(again[:2]), again[:3]
    # and the comparison does not list every metric with a difference of 0.000 on every case
    assert not [line for line in again if re.search(r"\b0\.000\s+│\s+\[0\.000, 0\.000\]", line)]
    assert any("identical" in line for line in again)


def test_compare_prints_its_verdict_first(pair):
    lines = printed(print_comparison, open_lake(pair.lake), pair.a, pair.b)
    assert lines[0].startswith("verdict"), lines[:3]


# --- finding 2: the cases of every metric that regressed overall ----------------------------------------


def test_the_report_lists_the_cases_of_every_metric_that_regressed_first(pair):
    assert not get_metric("answer_relevance_emb").worst_cases  # the registry does not flag it
    data = gather(open_lake(pair.lake), pair.b, against=pair.a)
    regressed = [r["metric"] for r in data.comparison.overall if r["regression"]]
    assert regressed == ["answer_relevance_emb"]
    assert list(data.worsened)[0] == "answer_relevance_emb"
    headline = [m for m in data.worsened if get_metric(m).headline]
    assert list(data.worsened) == ["answer_relevance_emb", *[m for m in headline if m != "answer_relevance_emb"]]


# --- finding 4: impossible intervals, captions, slice labels --------------------------------------------


def test_intervals_never_leave_the_metrics_range(pair):
    q = open_lake(pair.lake)
    rows = q.compare(pair.a, pair.b)
    (recency,) = [r for r in rows if r["metric"] == "recency_rule_ok" and r["dimension"] == "all"]
    assert recency["diff"] == pytest.approx(7 / 9) and recency["ci_high"] == 1.0  # was 1.137
    for r in rows:
        low, high = get_metric(r["metric"]).bounds
        for key in ("ci_low", "ci_high", "fdr_low", "fdr_high"):
            if r[key] is not None:
                assert -(high - low) <= r[key] <= high - low, (r["metric"], r["slice"], key, r[key])
    for r in q.metric_ci(pair.b, "any"):
        low, high = get_metric(r["metric"]).bounds
        assert low <= r["ci_low"] <= r["ci_high"] <= high, r


def test_slice_labels_never_repeat_their_dimension(pair):
    assert slice_label("answerable", "answerable") == "answerable"
    assert slice_label("answerable", "unanswerable") == "unanswerable"
    assert slice_label("tag", "(untagged)") == "untagged"
    assert slice_label("category", "factual") == "category=factual" and slice_label("all", "all") == "all"
    data = gather(open_lake(pair.lake), pair.b, against=pair.a)
    html = render_html(data)
    assert "answerable=answerable" not in html and "answerable=unanswerable" not in html
    lines = printed(print_runs, open_lake(pair.lake), [pair.a, pair.b])
    assert not [line for line in lines if "answerable=" in line]


def test_the_difference_charts_caption_names_the_interval_it_draws(pair):
    data = gather(open_lake(pair.lake), pair.b, against=pair.a)
    html = render_html(data)
    chart = html[html.index('id="chart-diff"') :]
    chart = chart[: chart.index("</figure>")]
    assert "bootstrap" not in chart and "sign-flip" in chart


# --- finding 6: one of two identical metrics, each note once, precise fold lines ------------------------


def test_a_metric_that_repeats_another_is_shown_once_by_default(pair):
    assert get_metric("semantic_similarity").same_as == "answer_correctness_emb"
    q = open_lake(pair.lake)
    summary = printed(print_run_summary, q, pair.b)
    assert any("answer_correctness_emb" in line for line in summary)
    assert not any("semantic_similarity" in line.split("│")[1] for line in summary if line.startswith("│"))
    comparison = printed(print_comparison, q, pair.a, pair.b)
    assert not any("semantic_similarity" in line for line in comparison)
    data = gather(q, pair.b, against=pair.a)
    assert "semantic_similarity" not in [r["metric"] for r in data.headline + data.comparison.overall]
    # the lake keeps both
    assert {"semantic_similarity", "answer_correctness_emb"} <= set(q.scored_metrics([pair.b]))


def test_the_no_judge_note_is_printed_once_and_fold_lines_count_only_metrics_without_values(tmp_path):
    lake = str(tmp_path / "lake")
    metrics = ["recall_any_at_k", "topical_precision_at_k", "grounding_presence_rate", "groundedness", "correctness"]
    land(
        lake, str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-1", metrics=metrics
    )
    lines = printed(print_run_summary, open_lake(lake), "r-1")
    assert sum("no judge" in line for line in lines) == 1, lines
    rows = [
        {"metric": "lab", "family": "label", "n": 0, "n_undefined": 5, "n_skipped": 0, "n_failed": 0},
        {"metric": "mix", "family": "label", "n": 0, "n_undefined": 4, "n_skipped": 1, "n_failed": 0},
        {"metric": "fine", "family": "label", "n": 2, "n_undefined": 3, "n_skipped": 0, "n_failed": 0},
    ]
    for r in rows:
        r["main_reason"] = "no_labels"
    (group,) = fold_unscored(rows)
    assert group["metrics"] == ["lab", "mix"]
    assert (
        group["text"]
        == "2 label metrics with no value (lab, mix): undefined on most cases (no labels in the golden set)"
    )


def test_same_as_names_a_registered_metric_of_the_same_level():
    from raglake.metrics.registry import all_metrics

    twins = [m for m in all_metrics() if m.same_as]
    assert twins
    for m in twins:
        other = get_metric(m.same_as)
        assert other.level == m.level and other.family == m.family and not other.same_as
