"""Issue 14, item 1: multiple-comparison control. Benjamini-Hochberg (sql/views/07_paired_tests.sql)
against a hand-computed example and scipy.stats.false_discovery_control; compare_runs' verdicts are
BH over its family of tests, the FCR-adjusted interval agrees with them, `fdr` None falls back to the
raw flags and `tests` narrows the family; under a complete null (two runs of one system, 960 metric ×
slice tests) the FDR-controlled verdicts flag nothing in at least 95% of seeded simulations, where the
uncorrected flags fire in nearly every one; `raglake compare` and the report print the number of tests
and switch with --fdr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import false_discovery_control
from typer.testing import CliRunner

from raglake.analysis import MAX_NAMED, parse_fdr
from raglake.errors import ConfigError
from raglake.lake.query import fetch
from raglake.metrics.registry import repeated
from raglake.pipeline.lakes import open_lake
from raglake.report import gather, write
from tests.conftest import ROOT
from tests.lakekit import land
from tests.pairkit import PairedComparison, null_runs, sample_slices

GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
CAPTURES = ROOT / "data" / "captures"
METRICS = ["recall_any_at_k", "mrr_at_k", "ndcg_at_k", "recall_all_at_k", "precision_at_k", "abstention_accuracy"]


@pytest.fixture(scope="module")
def pairs() -> PairedComparison:
    return PairedComparison()


def bh(pc: PairedComparison, ps: list[float]) -> list[float]:
    """The SQL macro's q-values, in the order of `ps`."""
    tests = [{"key": {"i": i}, "p": p} for i, p in enumerate(ps)]
    rows = fetch(pc.con, "SELECT key.i, q_value, n_tests FROM bh_adjust($t) ORDER BY key.i", t=tests)
    assert all(n == len(ps) for _, _, n in rows)
    return [q for _, q, _ in rows]


def test_bh_matches_a_hand_computed_example(pairs):
    # sorted: 0.005 0.01 0.03 0.04 0.2; p·m/i: 0.025 0.025 0.05 0.05 0.2; running minimum from the top
    assert bh(pairs, [0.01, 0.04, 0.03, 0.005, 0.2]) == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.2], abs=1e-15)
    # at q = 0.05 BH rejects four (p(4) = 0.04 <= 4·0.05/5), at q = 0.04 two (0.03 > 3·0.04/5)
    # ties share their q-value whatever order they are ranked in: p·m/i = 0.06, 0.03 -> both 0.03
    assert bh(pairs, [0.02, 0.5, 0.02]) == pytest.approx([0.03, 0.5, 0.03], abs=1e-15)
    assert bh(pairs, [0.9]) == [0.9] and bh(pairs, [0.3, 0.6]) == pytest.approx([0.6, 0.6])
    assert fetch(pairs.con, "SELECT count(*) FROM bh_adjust(NULL)") == [(0,)]


def test_bh_matches_scipy(pairs):
    rng = np.random.default_rng(14)
    for m in (2, 7, 50, 600):
        ps = np.concatenate([rng.uniform(size=m - m // 3), rng.uniform(0, 1e-3, size=m // 3)])
        ps[: m // 10] = np.round(ps[: m // 10], 2)  # ties
        ps[0], ps[-1] = 1.0, 0.0
        got = np.array(bh(pairs, ps.tolist()))
        np.testing.assert_allclose(got, false_discovery_control(ps), rtol=1e-12, atol=1e-15)


def _mixed(seed: int, n_cases: int = 66, n_metrics: int = 24) -> tuple[np.ndarray, np.ndarray, list]:
    """A comparison with real differences in a third of the metrics (B better or worse) and none in the rest."""
    rng = np.random.default_rng(seed)
    a, b = null_runs(rng, n_metrics, n_cases)
    shift = np.zeros(n_metrics)
    shift[::3] = np.linspace(-0.25, 0.25, len(shift[::3]))
    metrics = [(f"m{i:02d}", bool(i % 5)) for i in range(n_metrics - 1)] + [("undirected", None)]
    return a, b + shift[:, None], metrics


def test_compare_verdicts_are_bh_over_its_tests(pairs):
    a, b, metrics = _mixed(1)
    rows = pairs.compare(a, b, sample_slices(), metrics, fdr=0.05)
    tested = [r for r in rows if r["tested"]]
    assert {r["metric"] for r in rows} - {r["metric"] for r in tested} == {"undirected"}  # no direction: no test
    assert all(r["n_pairs"] >= 5 for r in tested) and any(r["n_pairs"] < 5 for r in rows)
    assert all(
        r["q_value"] is None and not r["regression_raw"] and not r["regression"] for r in rows if not r["tested"]
    )
    assert all(r["n_tests"] == len(tested) for r in tested)
    q = false_discovery_control([r["p_value"] for r in tested])
    np.testing.assert_allclose([r["q_value"] for r in tested], q, rtol=1e-12)
    for r, qv in zip(tested, q):
        worse = r["diff"] < 0 if r["higher_is_better"] else r["diff"] > 0
        assert r["regression"] == (qv <= 0.05 and worse) and r["improvement"] == (qv <= 0.05 and not worse)
        # the FCR-adjusted interval excludes 0 on exactly the rows BH keeps
        excludes = r["fdr_low"] is not None and (r["fdr_low"] > 0 or r["fdr_high"] < 0)
        assert excludes == (qv <= 0.05), r
        if r["fdr_low"] is not None and r["ci_low"] is not None:
            assert r["fdr_low"] <= r["ci_low"] and r["ci_high"] <= r["fdr_high"]  # wider than the raw one
    real = sum(r["regression"] or r["improvement"] for r in tested)
    raw = sum(r["regression_raw"] or r["improvement_raw"] for r in tested)
    assert 0 < real < raw  # the example has discoveries, and raw flags the control does not keep
    assert all(r["regression_raw"] or r["improvement_raw"] for r in tested if r["regression"] or r["improvement"])


def test_fdr_off_gives_the_raw_flags_and_tests_narrow_the_family(pairs):
    a, b, metrics = _mixed(2)
    slices = sample_slices()
    both = pairs.compare(a, b, slices, metrics, fdr=0.05)
    off = pairs.compare(a, b, slices, metrics, fdr=None)
    assert [r["p_value"] for r in off] == [r["p_value"] for r in both]
    assert all(r["regression"] == r["regression_raw"] and r["improvement"] == r["improvement_raw"] for r in off)
    assert all(r["fdr_low"] is None and r["fdr_high"] is None for r in off)
    assert sum(r["regression"] for r in off) > sum(r["regression"] for r in both)

    family = [
        {"metric": "m00", "dimension": "all", "min_pairs": 5},
        {"metric": "m03", "dimension": "category", "min_pairs": 9},
    ]
    rows = pairs.compare(a, b, slices, metrics, tests=family, min_pairs=1)
    tested = [r for r in rows if r["tested"]]
    assert {(r["metric"], r["dimension"]) for r in tested} == {("m00", "all"), ("m03", "category")}
    assert all(r["n_pairs"] >= 9 for r in tested if r["dimension"] == "category")
    assert any(r["n_pairs"] < 9 for r in rows if (r["metric"], r["dimension"]) == ("m03", "category"))
    np.testing.assert_allclose(
        [r["q_value"] for r in tested], false_discovery_control([r["p_value"] for r in tested]), rtol=1e-12
    )
    assert not pairs.compare(a, b, slices, metrics, tests=[])[0]["tested"]  # an empty family tests nothing


def test_a_complete_null_flags_nothing_in_95_percent_of_simulations(pairs):
    """Two runs of one system (per-case difficulty, A and B drawn alike), 40 metrics of four kinds over
    the sample's slices: 960 tests per comparison. Uncorrected, about 35 flags per comparison."""
    slices = sample_slices()
    metrics = [(f"m{i:02d}", True) for i in range(40)]
    rng = np.random.default_rng(20261123)
    sims, clean, raw_counts = 60, 0, []
    for _ in range(sims):
        rows = pairs.compare(*null_runs(rng, len(metrics), 66), slices, metrics)
        assert rows[0]["n_tests"] == 960
        clean += not any(r["regression"] or r["improvement"] for r in rows)
        raw_counts.append(sum(r["regression_raw"] or r["improvement_raw"] for r in rows))
    assert clean >= 0.95 * sims, clean
    assert min(raw_counts) > 5 and np.mean(raw_counts) > 20  # without the control, every comparison "finds" some


def test_parse_fdr():
    assert (
        parse_fdr("off") is None and parse_fdr(False) is None and parse_fdr(None) is None and parse_fdr("None") is None
    )
    assert parse_fdr("0.1") == 0.1 and parse_fdr(0.05) == 0.05
    for bad in ("0", "1", "1.5", "-0.1", "often", True):
        with pytest.raises(ConfigError, match="give a number between 0 and 1"):
            parse_fdr(bad)


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    lake = str(tmp_path_factory.mktemp("fdr") / "lake")
    land(lake, str(GOLDEN), f"replay:{CAPTURES / 'local_search.jsonl'}", "r-local", metrics=METRICS)
    land(lake, str(GOLDEN), f"replay:{CAPTURES / 'basic_search.jsonl'}", "r-basic", minutes=5, metrics=METRICS)
    return lake


def _compare(lake: str, *args: str) -> tuple[int, str]:
    from raglake.cli import app

    result = CliRunner().invoke(app, ["compare", "r-local", "r-basic", "--lake", lake, *args])
    return result.exit_code, " ".join(result.output.split())


def test_compare_prints_the_number_of_tests_and_switches_with_fdr(lake):
    rows = open_lake(lake).compare("r-local", "r-basic")
    tested = sum(r["tested"] for r in rows)
    real = [r for r in rows if r["dimension"] != "all" and (r["regression"] or r["improvement"])]
    raw = [r for r in rows if r["dimension"] != "all" and (r["regression_raw"] or r["improvement_raw"])]
    assert 0 < len(real) < len(raw)

    code, out = _compare(lake)
    assert code == 0, out
    assert f"{tested} tests (metric × slice with enough pairs and a direction); Benjamini-Hochberg" in out
    assert f"slices where the difference is real (Benjamini-Hochberg, FDR 0.05): {len(real)}" in out
    assert "(uncorrected: " in out  # a raw flag the control does not keep, beside its verdict

    code, out = _compare(lake, "--fdr", "off")
    assert code == 0 and "no multiple-comparison control (--fdr off)" in out, out
    assert f"slices where the difference is real (uncorrected 95% CI excludes 0): {len(raw)}" in out

    code, out = _compare(lake, "--fdr", "0.2")
    assert code == 0 and "false discovery rate of 0.2" in out
    n = int(re.search(r"difference is real \(Benjamini-Hochberg, FDR 0.2\): (\d+)", out).group(1))
    assert n >= len(real)  # a looser rate keeps at least as many (it may keep more than the raw 95% flags)


def test_compare_opens_with_the_verdict_before_the_table(lake):
    rows = open_lake(lake).compare("r-local", "r-basic")
    twins = repeated({r["metric"] for r in rows})  # one of two metrics that give the same figure is shown
    rows = [r for r in rows if r["metric"] not in twins]
    overall = [r for r in rows if r["dimension"] == "all"]
    worse = [r for r in overall if r["regression"]]
    n_worse = sum(1 for r in rows if r["dimension"] != "all" and r["regression"])
    n_better = sum(1 for r in rows if r["dimension"] != "all" and r["improvement"])
    assert n_worse + n_better > 0  # the fixture's runs differ, so the verdict has something to say

    code, out = _compare(lake)
    assert code == 0, out
    verdict = out.index("verdict (B = basic_search against A = local_search): over all cases")
    assert verdict == 0  # the first thing printed
    table = out.index("A = local_search (r-local)")
    assert verdict < out.index("tests (metric × slice") < table < out.index("slices where the difference")
    assert f"Slices: {n_worse} worse, {n_better} better." in out
    said = out[verdict : out.index(". Slices:")]
    for r in worse[:MAX_NAMED]:  # the regressions over all cases are named first, each with its labelled interval
        shown = f"{r['metric']} {r['diff']:+.3f} (95% CI [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}])"
        assert shown in said, (shown, said)
    assert (f"and {len(worse) - MAX_NAMED} more" in said) == (len(worse) > MAX_NAMED)
    assert ("worse on" in said) == bool(worse)


def test_compare_rejects_a_bad_fdr(lake, monkeypatch, capsys):
    from raglake.cli import main

    monkeypatch.setattr("sys.argv", ["raglake", "compare", "r-local", "r-basic", "--lake", lake, "--fdr", "5"])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2 and "FDR level '5': give a number between 0 and 1" in capsys.readouterr().out


def test_report_comparison_counts_tests_and_switches_with_fdr(lake, tmp_path: Path):
    q = open_lake(lake)
    data = gather(q, "r-basic", "r-local", worst=0)
    cmp = data.comparison
    assert cmp.fdr == 0.05 and cmp.n_tests == sum(r["tested"] for r in q.compare("r-local", "r-basic"))
    assert cmp.n_raw > cmp.n_flagged > 0 and f"{cmp.n_tests} tests" in cmp.summary
    text = write(data, tmp_path / "report.html").read_text()
    assert f"across the {cmp.n_tests} metric × slice tests" in text and '<th class="n">q</th>' in text
    assert "(uncorrected: " in text

    off = gather(q, "r-basic", "r-local", worst=0, fdr=None).comparison
    assert off.fdr is None and off.n_flagged == cmp.n_raw
    json.dumps(off.summary)
