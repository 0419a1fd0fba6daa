"""The SQL files over a lake of hand-made runs: views, breakdowns, the paired comparison (checked
against an independent numpy computation), metric_ci's bootstrap (against numpy's) and trends."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from raglake.analysis import LakeQueries, resolve_run
from raglake.errors import ConfigError, UnknownNameError
from raglake.lake.query import fetch, run_query, scalar
from raglake.lake.store import Lake
from raglake.pipeline.lakes import open_lake
from tests.conftest import FIXTURES
from tests.lakekit import land

N = 40


def _golden(path: Path) -> str:
    rows = []
    for i in range(N):
        rows.append(
            {
                "id": f"q{i:02d}",
                "question": f"question {i}",
                "category": "factual" if i % 2 else "reasoning",
                "difficulty": ("easy", "medium", "hard")[i % 3],
                "tags": ["alpha", "beta"] if i % 4 == 0 else ["alpha"],
                "vault": "work" if i < 32 else "personal",
                "gold_supports": [{"rel_path": f"doc{i}.md", "heading_path": "T > S"}],
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def _captures(path: Path, hit_rank: dict[int, int | None], method: str) -> str:
    """One capture per case; the gold chunk sits at hit_rank[i] (None: not retrieved)."""
    rows = []
    for i in range(N):
        chunks = [
            {"rank": r, "rel_path": f"noise{r}.md", "heading_path": "N", "text": "", "score": 1 - r / 10}
            for r in range(1, 6)
        ]
        if hit_rank.get(i):
            chunks[hit_rank[i] - 1] = {**chunks[hit_rank[i] - 1], "rel_path": f"doc{i}.md", "heading_path": "T > S > P"}
        rows.append(
            {"case_id": f"q{i:02d}", "method": method, "answer": "an answer", "abstained": False, "retrieved": chunks}
        )
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return f"replay:{path}"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[LakeQueries, dict[str, dict[int, int | None]]]:
    root = tmp_path_factory.mktemp("sqlake")
    golden = _golden(root / "golden.jsonl")
    rng = np.random.default_rng(7)
    good = {i: int(rng.integers(1, 3)) for i in range(N)}  # always found, at rank 1 or 2
    bad = {i: (good[i] if i < 12 else None) for i in range(N)}  # misses 28 of 40
    noisy = {i: int(rng.integers(1, 6)) if rng.random() < 0.8 else None for i in range(N)}
    lake_dir = str(root / "lake")
    land(lake_dir, golden, _captures(root / "good.jsonl", good, "good"), "r-good", minutes=0)
    land(lake_dir, golden, _captures(root / "bad.jsonl", bad, "bad"), "r-bad", minutes=1)
    land(lake_dir, golden, _captures(root / "noisy.jsonl", noisy, "noisy"), "r-noisy", minutes=2)
    land(lake_dir, golden, _captures(root / "good2.jsonl", good, "good"), "r-good-again", minutes=3)
    return open_lake(lake_dir), {"r-good": good, "r-bad": bad, "r-noisy": noisy}


def _row(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def test_breakdown_means_and_counts_match_hand_computation(lake) -> None:
    q, hits = lake
    rows = q.breakdown(["r-noisy"], "vault")
    noisy = hits["r-noisy"]
    for vault, ids in (("work", range(32)), ("personal", range(32, N))):
        expected_mrr = np.mean([1 / noisy[i] if noisy[i] else 0.0 for i in ids])
        row = _row(rows, slice=vault, metric="mrr_at_k")
        assert row["n"] == len(ids) and math.isclose(row["mean"], expected_mrr)
        assert row["target_name"] == "noisy" and row["n_undefined"] == 0
    scope = _row(rows, slice="work", metric="scope_miss")
    assert scope["n"] == 0 and scope["n_undefined"] == 32 and scope["mean"] is None


def test_breakdown_by_tag_counts_a_case_in_each_of_its_tags(lake) -> None:
    q, hits = lake
    rows = q.breakdown(["r-bad"], "tag")
    alpha = _row(rows, slice="alpha", metric="recall_any_at_k")
    beta = _row(rows, slice="beta", metric="recall_any_at_k")
    assert alpha["n"] == N and beta["n"] == N // 4
    assert math.isclose(beta["mean"], np.mean([1.0 if hits["r-bad"][i] else 0.0 for i in range(0, N, 4)]))


def test_breakdown_by_target_over_several_runs(lake) -> None:
    q, _ = lake
    rows = q.breakdown(["r-good", "r-bad"], "target")
    assert {r["slice"] for r in rows} == {"good", "bad"}
    assert _row(rows, slice="good", metric="recall_any_at_k")["mean"] == 1.0


def test_compare_flags_a_real_regression_and_its_slices(lake) -> None:
    q, hits = lake
    rows = q.compare("r-good", "r-bad")
    overall = _row(rows, metric="recall_any_at_k", dimension="all", slice="all")
    assert overall["n_pairs"] == N and math.isclose(overall["diff"], 12 / N - 1.0)
    assert overall["regression"] and not overall["improvement"] and overall["ci_high"] < 0
    assert _row(rows, metric="recall_any_at_k", dimension="vault", slice="personal")["regression"]


def test_compare_identical_runs_shows_no_change(lake) -> None:
    q, _ = lake
    rows = q.compare("r-good", "r-good-again")
    assert rows and all(r["diff"] == 0 and not r["regression"] and not r["improvement"] for r in rows)
    overall = _row(rows, metric="mrr_at_k", dimension="all", slice="all")
    assert overall["ci_low"] == 0 and overall["ci_high"] == 0


def test_compare_interval_agrees_with_numpy_and_is_reproducible(lake) -> None:
    """The paired sign-flip test (z = Σd/√Σd²) and the interval inverting it, m ± c·s/√(n - c²),
    recomputed with numpy on the slice's differences."""
    q, hits = lake
    rows = q.compare("r-good", "r-noisy")
    row = _row(rows, metric="mrr_at_k", dimension="all", slice="all")
    rr = lambda r: 1 / r if r else 0.0  # noqa: E731
    d = np.array([rr(hits["r-noisy"][i]) - rr(hits["r-good"][i]) for i in range(N)])
    assert math.isclose(row["diff"], d.mean())
    c = 1.959963984540054
    half = c * d.std() / math.sqrt(N - c * c)
    assert math.isclose(row["ci_low"], d.mean() - half) and math.isclose(row["ci_high"], d.mean() + half)
    assert math.isclose(row["p_value"], math.erfc(abs(d.sum()) / math.sqrt((d * d).sum()) / math.sqrt(2)))
    again = _row(q.compare("r-good", "r-noisy"), metric="mrr_at_k", dimension="all", slice="all")
    assert again == row


def test_bootstrap_resamples_are_independent_in_small_slices(lake) -> None:
    """In an 8-case slice metric_ci's interval must match numpy's bootstrap: resample indexes that
    repeat across replicates (a weak hash) would make it far too narrow."""
    q, hits = lake
    rows = q.metric_ci("r-noisy", "vault", n_boot=4000, seed=5)
    row = _row(rows, metric="mrr_at_k", dimension="vault", slice="personal")
    ids = range(32, N)
    rr = lambda r: 1 / r if r else 0.0  # noqa: E731
    d = np.array([rr(hits["r-noisy"][i]) for i in ids])
    assert row["n"] == len(d) == 8 and d.std() > 0
    means = d[np.random.default_rng(1).integers(0, len(d), size=(40000, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    width = high - low
    assert abs((row["ci_high"] - row["ci_low"]) - width) < 0.15 * width
    assert abs(row["ci_low"] - low) < 0.1 * width + 0.01 and abs(row["ci_high"] - high) < 0.1 * width + 0.01


def _seeded_interval(q: LakeQueries, values: np.ndarray, n_boot: int, seed: int, alpha: float) -> np.ndarray:
    """The interval the SQL must give: numpy's quantiles of the means of `values` (in case_id order)
    over the seeded draws of `resample_draws` (sql/views/05_resample_draws.sql)."""
    draws = fetch(
        q.con,
        "SELECT picks FROM resample_draws([$n], $n_boot, $seed) ORDER BY r",
        n=len(values),
        n_boot=n_boot,
        seed=seed,
    )
    means = np.array([values[np.asarray(picks) - 1].mean() for (picks,) in draws])
    return np.quantile(means, [alpha / 2, 1 - alpha / 2])


def test_metric_ci_is_the_seeded_draws_applied_to_the_slice(lake) -> None:
    """metric_ci resamples the seeded draws: pinned to 1e-12 by a numpy bootstrap over the very draws
    the SQL makes (so the macro cannot change an interval)."""
    q, hits = lake
    rr = lambda r: 1 / r if r else 0.0  # noqa: E731
    one_run = q.metric_ci("r-noisy", "vault", n_boot=300, seed=11, alpha=0.1)
    for vault, ids in (("work", range(32)), ("personal", range(32, N))):
        v = np.array([rr(hits["r-noisy"][i]) for i in ids])
        row = _row(one_run, metric="mrr_at_k", slice=vault)
        assert row["ci_low"] < row["mean"] < row["ci_high"]
        assert np.allclose([row["ci_low"], row["ci_high"]], _seeded_interval(q, v, 300, 11, 0.1), rtol=0, atol=1e-12)


def test_min_pairs_keeps_tiny_slices_unflagged(lake) -> None:
    q, _ = lake
    rows = run_query(
        q.con, "compare_runs", run_a="r-good", run_b="r-bad", alpha=0.05, min_pairs=1000, fdr=0.05, tests=None
    ).to_pylist()
    assert rows and not any(r["regression"] or r["regression_raw"] or r["tested"] for r in rows)


def test_trend_orders_runs_by_time(lake) -> None:
    q, _ = lake
    rows = q.trend("recall_any_at_k")
    assert [r["run_id"] for r in rows] == ["r-good", "r-bad", "r-noisy", "r-good-again"]
    assert [r["run_id"] for r in q.trend("recall_any_at_k", target="good")] == ["r-good", "r-good-again"]


def test_run_resolution(lake) -> None:
    q, _ = lake
    assert resolve_run(q.con, "latest") == "r-good-again"
    assert resolve_run(q.con, "latest~3") == "r-good"
    assert resolve_run(q.con, "r-n") == "r-noisy"
    assert resolve_run(q.con, "r-good") == "r-good"  # an exact id wins over being a prefix of another
    with pytest.raises(ConfigError, match="ambiguous"):
        resolve_run(q.con, "r-g")
    with pytest.raises(UnknownNameError, match="did you mean 'r-noisy'"):
        resolve_run(q.con, "r-nosiy")


def test_parameters_are_bound_not_pasted(lake) -> None:
    q, _ = lake
    hostile = "r-good' OR '1'='1"
    assert run_query(q.con, "breakdown", run_ids=[hostile], dimension="all").num_rows == 0
    with pytest.raises(ConfigError, match=r"needs parameter\(s\) \$dimension"):
        run_query(q.con, "breakdown", run_ids=["r-good"])


def test_scores_latest_keeps_the_newest_scoring(tmp_path: Path) -> None:
    import datetime as dt

    from raglake.lake.tables import TABLES, to_arrow

    lake_dir = str(tmp_path / "lake")
    land(lake_dir, str(FIXTURES / "mini_golden.jsonl"), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-m")
    later = dt.datetime(2027, 1, 1, tzinfo=dt.timezone.utc)
    cols = {
        "case_id": ["c1"],
        "metric": ["mrr_at_k"],
        "value": [0.25],
        "status": ["ok"],
        "reason": [None],
        "metric_version": ["2"],
        "scoring_id": ["s-new"],
        "scored_at": [later],
    }
    unset = ("label_source", "embedder", "judge_model", "prompt_id", "prompt_version", "judge_call", "is_latest")
    Lake(lake_dir).write("scores", "r-m", to_arrow(TABLES["scores"], cols, optional=unset), "s-new")
    q = open_lake(lake_dir)
    latest = fetch(q.con, "SELECT value, metric_version FROM scores_latest WHERE case_id='c1' AND metric='mrr_at_k'")
    assert latest == [(0.25, "2")]
    assert scalar(q.con, "SELECT count(*) FROM scores WHERE case_id='c1' AND metric='mrr_at_k'") == 2


def test_unknown_metric_or_target_is_an_error_with_a_suggestion(lake) -> None:
    q, _ = lake
    with pytest.raises(UnknownNameError, match=r"metric 'recall_any_at_5' \(did you mean 'recall_any_at_k'\?\)"):
        q.trend("recall_any_at_5")
    with pytest.raises(UnknownNameError, match=r"unknown target 'god' \(did you mean 'good'\?\)"):
        q.trend("recall_any_at_k", target="god")
    with pytest.raises(UnknownNameError, match="did you mean 'mrr_at_k'"):
        q.check_metrics(["recall_any_at_k", "mrr_at_kk"])
    q.check_metrics(["recall_any_at_k", "mrr_at_k"])  # known names pass
    assert q.trend("recall_any_at_k", target="good")  # and still answer
