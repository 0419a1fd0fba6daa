"""`raglake gate`: a deliberately worse capture set (the gold chunks of every other answerable case
moved out of reach) fails against its baseline, exit 1 with the failing rows; the same captures pass;
a tolerance above the drop passes; a drop the interval cannot tell from zero passes; a drop real on its
own slice's interval but not once the false discovery rate is controlled across the checks passes
(and fails with `fdr: off`); `--baseline latest` is the previous run of the same target and golden set;
bad rules files exit 2 naming the file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raglake.gate import evaluate_gate, load_rules
from raglake.lake.query import connect, fetch
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from tests.conftest import ROOT
from tests.lakekit import land

GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
CAPTURES = ROOT / "data" / "captures" / "local_search.jsonl"
RULES = ROOT / "data" / "gate.yaml"
METRICS = [
    "recall_any_at_k",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_all_at_k",
    "abstention_accuracy",
    "hallucination_rate_unanswerable",
]
RETRIEVAL = {"recall_any_at_k", "mrr_at_k", "ndcg_at_k", "recall_all_at_k"}
# baseline, another target in between, the damaged candidate, then the original captures again
RUNS = {"r-good": 0, "r-basic": 5, "r-bad": 10, "r-again": 20}


def damaged(captures: list[dict], case_ids: set[str]) -> list[dict]:
    """The captures with every retrieved chunk of `case_ids` moved to another folder: no gold match."""
    return [
        {**c, "retrieved": [{**ch, "rel_path": "elsewhere/" + ch["rel_path"]} for ch in c["retrieved"]]}
        if c["case_id"] in case_ids
        else c
        for c in captures
    ]


def write(path: Path, captures: list[dict]) -> str:
    path.write_text("".join(json.dumps(c) + "\n" for c in captures))
    return f"replay:{path}"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> str:
    tmp = tmp_path_factory.mktemp("gate")
    lake = str(tmp / "lake")
    captures = [json.loads(line) for line in CAPTURES.read_text().splitlines() if line.strip()]
    answerable = [
        c["case_id"]
        for c in captures
        if next(g for g in golden_cases() if g["id"] == c["case_id"]).get("answerable", True)
    ]
    bad = write(tmp / "worse.jsonl", damaged(captures, set(answerable[1::2])))
    one = write(tmp / "one_worse.jsonl", damaged(captures, set(first_hits(captures, 1))))
    four = write(tmp / "four_worse.jsonl", damaged(captures, set(first_hits(captures, 4))))
    targets = {
        "r-good": f"replay:{CAPTURES}",
        "r-basic": f"replay:{ROOT / 'data' / 'captures' / 'basic_search.jsonl'}",
        "r-bad": bad,
        "r-again": f"replay:{CAPTURES}",
    }
    for run_id, minutes in RUNS.items():
        land(lake, str(GOLDEN), targets[run_id], run_id, minutes=minutes, metrics=METRICS)
    land(lake, str(GOLDEN), one, "r-one-worse", minutes=30, metrics=METRICS)
    land(lake, str(GOLDEN), four, "r-four-worse", minutes=40, metrics=METRICS)
    return lake


def golden_cases() -> list[dict]:
    return [json.loads(line) for line in GOLDEN.read_text().splitlines() if line.strip()]


def first_hits(captures: list[dict], n: int) -> list[str]:
    """The first n answerable cases whose first retrieved chunk is a gold support (recall 1 at rank 1)."""
    gold = {g["id"]: {s["rel_path"] for s in g.get("gold_supports", [])} for g in golden_cases()}
    hits = [c["case_id"] for c in captures if c["retrieved"] and c["retrieved"][0]["rel_path"] in gold[c["case_id"]]]
    assert len(hits) >= n
    return hits[:n]


def gate(lake: str, *args: object):
    from raglake.cli import app

    return CliRunner().invoke(app, ["gate", "--lake", lake, *map(str, args)])


def main_exit(monkeypatch, capsys, *args: object) -> tuple[int, str]:
    from raglake.cli import main

    monkeypatch.setattr(sys, "argv", ["raglake", *map(str, args)])
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, " ".join(capsys.readouterr().out.split())


def mean(lake: str, run_id: str, metric: str) -> float:
    return fetch(
        connect(Lake(lake)),
        "SELECT avg(value) FROM scores_latest WHERE run_id = $r AND metric = $m AND status = 'ok'",
        r=run_id,
        m=metric,
    )[0][0]


def test_a_worse_capture_set_fails_the_gate_and_prints_the_failing_rows(lake):
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-bad", "--rules", RULES)
    assert result.exit_code == 1, result.output + repr(result.exception)
    out = result.output
    assert "gate: local_search r-bad against r-good:" in out
    failing_table = out[out.index("failing") :]
    for metric in RETRIEVAL:
        assert metric in failing_table
    assert "abstention_accuracy" not in failing_table  # untouched by the damage
    assert "recency_conflict" in failing_table  # recall_any_at_k is gated by category too

    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-bad", load_rules(RULES))
    assert f"{len(checked)} checks, {len(failing)} failing" in out
    assert {r["metric"] for r in failing} == RETRIEVAL
    assert all(r["drop"] > r["max_drop"] and r["ci_high"] < 0 and r["q_value"] <= 0.05 for r in failing)
    assert "Benjamini-Hochberg at a false discovery rate of 0.05 across the" in out
    # the family of the FDR control is the gate's own checks, not every row of the comparison
    assert all(r["tested"] and r["n_tests"] == len(checked) for r in checked)
    assert len(checked) < sum(r["tested"] for r in open_lake(lake).compare("r-good", "r-bad"))
    [recall] = [r for r in failing if (r["metric"], r["dimension"]) == ("recall_any_at_k", "all")]
    expected = mean(lake, "r-good", "recall_any_at_k") - mean(lake, "r-bad", "recall_any_at_k")
    assert recall["drop"] == pytest.approx(expected) and expected > 0.3
    assert {r["dimension"] for r in failing if r["metric"] != "recall_any_at_k"} == {"all"}


def test_the_same_captures_pass(lake):
    for baseline, candidate in (("r-good", "r-good"), ("r-good", "r-again"), ("r-again", "r-good")):
        result = gate(lake, "--baseline", baseline, "--candidate", candidate, "--rules", RULES)
        assert result.exit_code == 0, result.output + repr(result.exception)
        assert f"against {baseline}:" in result.output and "0 failing: pass" in result.output
    checked, _ = evaluate_gate(open_lake(lake), "r-good", "r-again", load_rules(RULES))
    assert {r["metric"] for r in checked} >= RETRIEVAL  # the pass checked something
    assert all(r["drop"] == 0 for r in checked)


def test_baseline_latest_is_the_previous_run_of_the_same_target_and_golden_set(lake):
    result = gate(lake, "--candidate", "r-bad", "--rules", RULES)  # --baseline latest is the default
    assert result.exit_code == 1 and "r-bad against r-good:" in result.output  # not r-basic, landed in between
    result = gate(lake, "--baseline", "latest", "--candidate", "r-again", "--rules", RULES)
    assert result.exit_code == 0 and "r-again against r-bad:" in result.output  # better than the last one
    result = gate(lake, "--candidate", "r-basic", "--rules", RULES)
    assert "no earlier run of the same target and golden set" in str(result.exception)


def test_a_tolerance_larger_than_the_drop_passes(lake, tmp_path):
    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-bad", load_rules(RULES))
    biggest = max(r["drop"] for r in failing)
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(
        f"defaults:\n  max_drop: {biggest + 0.01:.3f}\n  dimensions: [all, category]\nrules:\n  - metric: '*'\n"
    )
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-bad", "--rules", lenient)
    assert result.exit_code == 0, result.output
    assert "0 failing: pass" in result.output
    just_under = tmp_path / "just_under.yaml"  # only the rows that dropped by more than it fail
    tolerance = round(biggest - 0.01, 3)
    just_under.write_text(
        f"defaults:\n  max_drop: {tolerance}\n  dimensions: [all, category]\n"
        "rules:\n  - metric: '*'\n  - metric: mrr_at_k\n    ignore: true\n"
    )
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-bad", "--rules", just_under)
    assert result.exit_code == 1, result.output
    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-bad", load_rules(just_under))
    assert [(r["metric"], r["slice"]) for r in failing] == [
        (r["metric"], r["slice"]) for r in checked if r["drop"] > tolerance and r["ci_high"] < 0
    ]
    assert failing and "mrr_at_k" not in {r["metric"] for r in checked}  # ignored
    assert f"{len(failing)} failing" in result.output and "recency_conflict" in result.output


def test_a_drop_the_ci_cannot_tell_from_zero_passes(lake):
    """One case worse: recall falls by 1/n, more than the rule's 0.0, but the interval reaches over zero
    (McNemar on one discordant pair: z = 1, p = 0.32)."""
    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-one-worse", load_rules(RULES))
    [recall] = [r for r in checked if (r["metric"], r["dimension"]) == ("recall_any_at_k", "all")]
    assert recall["drop"] > recall["max_drop"] == 0.0 and recall["ci_low"] < 0 < recall["ci_high"]
    assert recall["p_value"] == pytest.approx(0.3173, abs=1e-4) and not recall["regression_raw"]
    assert not failing
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-one-worse", "--rules", RULES)
    assert result.exit_code == 0, result.output


def test_a_drop_real_only_uncorrected_fails_only_with_fdr_off(lake, tmp_path):
    """Four cases worse: recall's own 95% interval excludes zero (McNemar: 4 of 4 discordant pairs
    worse, z = 2, p = 0.046), but Benjamini-Hochberg across the gate's checks does not retain it; the
    rules' `fdr: off` goes back to the per-slice verdict and fails."""
    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-four-worse", load_rules(RULES))
    [recall] = [r for r in checked if (r["metric"], r["dimension"]) == ("recall_any_at_k", "all")]
    assert recall["p_value"] == pytest.approx(0.0455, abs=1e-4) and recall["regression_raw"]
    assert recall["q_value"] > 0.05 and not recall["regression"] and not failing
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-four-worse", "--rules", RULES)
    assert result.exit_code == 0 and "0 failing: pass" in result.output, result.output

    uncorrected = tmp_path / "uncorrected.yaml"
    uncorrected.write_text(RULES.read_text().replace("\nfdr: 0.05 ", "\nfdr: off  "))
    assert load_rules(uncorrected).fdr is None
    checked, failing = evaluate_gate(open_lake(lake), "r-good", "r-four-worse", load_rules(uncorrected))
    assert ("recall_any_at_k", "all") in {(r["metric"], r["dimension"]) for r in failing}
    assert all(r["regression_raw"] and r["regression"] for r in failing)
    result = gate(lake, "--baseline", "r-good", "--candidate", "r-four-worse", "--rules", uncorrected)
    assert result.exit_code == 1 and "own 95% interval (fdr: off, uncorrected)" in result.output, result.output


BAD_RULES = [
    (
        "misspelled",
        "rules:\n  - metric: mrr_at_k\n  - metric: recal_any_at_k\n    max_drop: 0.1\n",
        ":3: field 'rules[1].metric': 'recal_any_at_k' matches no case-level metric (did you mean 'recall_any_at_k'?)",
    ),
    ("glob", "rules:\n  - metric: 'nothing_*'\n", "'nothing_*' matches no case-level metric"),
    ("yaml", "rules:\n  - metric: mrr_at_k\n    max_drop: [0.1\n", "invalid YAML"),
    ("dimension", "rules:\n  - metric: mrr_at_k\n    dimensions: [catgory]\n", "(did you mean 'category'?)"),
    ("negative", "rules:\n  - metric: mrr_at_k\n    max_drop: -0.1\n", "max_drop"),
    ("unknown_key", "rules:\n  - metric: mrr_at_k\n    max_dorp: 0.1\n", "max_dorp"),
    ("no_rules", "defaults:\n  max_drop: 0.1\n", "rules"),
    (
        "fdr_level",
        "fdr: 1.5\nrules:\n  - metric: mrr_at_k\n",
        ":1: field 'fdr': FDR level 1.5: give a number between 0 and 1",
    ),
    ("fdr_word", "fdr: maybe\nrules:\n  - metric: mrr_at_k\n", "'maybe': give a number between 0 and 1"),
    ("not_mapping", "- mrr_at_k\n", "expected a mapping with `rules:`"),
]


@pytest.mark.parametrize(("name", "text", "words"), BAD_RULES, ids=[b[0] for b in BAD_RULES])
def test_a_bad_rules_file_exits_2_naming_the_file(lake, tmp_path, monkeypatch, capsys, name, text, words):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    code, out = main_exit(monkeypatch, capsys, "gate", "--lake", lake, "--candidate", "r-bad", "--rules", path)
    assert code == 2, out
    assert out.startswith(f"error: {path}:") and words in out, out


def test_a_missing_rules_file_or_run_exits_2(lake, tmp_path, monkeypatch, capsys):
    code, out = main_exit(
        monkeypatch, capsys, "gate", "--lake", lake, "--candidate", "r-bad", "--rules", tmp_path / "none.yaml"
    )
    assert code == 2 and "none.yaml" in out and "not found" in out
    code, out = main_exit(monkeypatch, capsys, "gate", "--lake", lake, "--candidate", "r-bda", "--rules", RULES)
    assert code == 2 and "unknown run 'r-bda' (did you mean 'r-bad'?)" in out
