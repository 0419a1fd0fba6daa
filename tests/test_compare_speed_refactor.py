"""The bootstrap of metric_ci after its resampling moved to numpy (issue 12, item 7): the draws are the
ones sql/views/05_resample_draws.sql defines, the resampled means are a plain-Python bootstrap over
those draws to the last bit (whatever the tiling). compare_runs (issue 14: a paired test per slice,
no resampling) is the formula of its header recomputed in Python, row by row. Every row of both
comes out identical on every call, connection and DuckDB thread count."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import duckdb
import numpy as np
import pytest

from raglake.lake import resample
from raglake.lake.query import fetch
from raglake.lake.resample import resample_means, resample_positions
from raglake.metrics.registry import get_metric
from raglake.pipeline.lakes import open_lake
from tests.lakekit import land

N = 48
CASES = [(1, 5, 0), (2, 9, 3), (7, 300, 11), (40, 60, -5), (33, 20, 2**62), (97, 10, 2**63 - 1)]


def _golden(path: Path) -> str:
    rows = [
        {
            "id": f"q{i:02d}",
            "question": f"question {i}",
            "category": ("factual", "reasoning", "multi_hop")[i % 3],
            "difficulty": ("easy", "hard")[i % 2],
            "tags": ["alpha", "beta"] if i % 4 == 0 else (["gamma"] if i % 5 == 0 else []),
            "vault": "work" if i < 40 else "personal",
            "gold_supports": [{"rel_path": f"doc{i}.md", "heading_path": "T > S"}],
        }
        for i in range(N)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def _captures(path: Path, rng: np.random.Generator, p_hit: float) -> str:
    """One capture per case; the gold chunk at a random rank 1-5 with probability p_hit."""
    rows = []
    for i in range(N):
        chunks = [
            {"rank": r, "rel_path": f"n{r}.md", "heading_path": "N", "text": "", "score": 1 - r / 10}
            for r in range(1, 6)
        ]
        if rng.random() < p_hit:
            rank = int(rng.integers(0, 5))
            chunks[rank] = {**chunks[rank], "rel_path": f"doc{i}.md", "heading_path": "T > S > P"}
        rows.append({"case_id": f"q{i:02d}", "answer": "an answer", "abstained": False, "retrieved": chunks})
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return f"replay:{path}"


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("speedlake")
    golden = _golden(root / "golden.jsonl")
    rng = np.random.default_rng(12)
    lake = str(root / "lake")
    for minutes, (run, p_hit) in enumerate((("r-a", 0.6), ("r-b", 0.8), ("r-c", 0.7))):
        land(lake, golden, _captures(root / f"{run}.jsonl", rng, p_hit), run, minutes=minutes)
    return lake


def _sql_picks(con: duckdb.DuckDBPyConnection, n: int, n_boot: int, seed: int) -> np.ndarray:
    rows = fetch(con, "SELECT picks FROM resample_draws([$n], $b, $s) ORDER BY r", n=n, b=n_boot, s=seed)
    return np.array([picks for (picks,) in rows])  # (n_boot, n), 1-based


def _plain_means(values: list[float], picks: np.ndarray) -> list[float]:
    """The bootstrap means of `values` over `picks`, with Python floats: each replicate summed in draw order."""
    means = []
    for row in picks:
        total = 0.0
        for p in row:
            total += values[p - 1]
        means.append(total / len(values))
    return means


def test_draws_are_the_ones_the_sql_defines(lake_dir) -> None:
    con = open_lake(lake_dir).con
    for n, n_boot, seed in CASES:
        picks = _sql_picks(con, n, n_boot, seed)
        assert picks.shape == (n_boot, n) and picks.min() >= 1 and picks.max() <= n
        assert np.array_equal(resample_positions(n, seed, range(n_boot), range(n)).T + 1, picks)
        # any block of replicates and of draws (starting at an even draw) is the same slice of them
        r0, j0 = n_boot // 3, n // 4 * 2
        assert np.array_equal(resample_positions(n, seed, range(r0, n_boot), range(j0, n)).T + 1, picks[r0:, j0:])


def test_resamples_differ_across_replicates_seeds_and_sizes() -> None:
    """Independent-looking draws: in an 8-value group nearly all 4,000 resamples are distinct (a weak
    hash repeats them), every position is drawn about equally often, and seeds and sizes change them."""
    picks = resample_positions(8, 5, range(4000), range(8)).T
    assert len({tuple(row) for row in picks}) > 3900
    counts = np.bincount(picks.ravel(), minlength=8)
    assert counts.min() > 0.9 * 4000 and counts.max() < 1.1 * 4000
    assert not np.array_equal(picks, resample_positions(8, 6, range(4000), range(8)).T)
    assert not np.array_equal(picks, resample_positions(9, 5, range(4000), range(9)).T[:, :8])


def test_means_are_a_plain_bootstrap_over_the_sql_draws(lake_dir) -> None:
    con = open_lake(lake_dir).con
    rng = np.random.default_rng(5)
    groups = [rng.normal(size=n) * scale for n, scale in ((7, 1.0), (7, 1e-6), (40, 1e6), (1, 3.0), (33, 0.1))]
    means = resample_means(groups, 120, 11)
    for values, got in zip(groups, means):
        want = _plain_means(values.tolist(), _sql_picks(con, len(values), 120, 11))
        assert got.tolist() == want  # to the last bit


def test_tiling_never_changes_a_mean(monkeypatch) -> None:
    rng = np.random.default_rng(9)
    groups = [rng.random(n) for n in (33,) * 10 + (5, 5, 64)]
    whole = resample_means(groups, 50, 3)
    monkeypatch.setattr(resample, "_TILE", 64)  # blocks of draws, of replicates and of groups
    monkeypatch.setattr(resample, "_SLAB", 4)
    tiled = resample_means(groups, 50, 3)
    assert all(np.array_equal(a, b) for a, b in zip(whole, tiled))


def test_sql_function_handles_nulls_and_empty_input(lake_dir) -> None:
    con = open_lake(lake_dir).con
    assert fetch(con, "SELECT resample_means(NULL, 10, 0)") == [(None,)]
    assert fetch(con, "SELECT resample_means([], 10, 0)") == [([],)]
    (with_null,), (zeroed,) = fetch(
        con, "SELECT resample_means(g, 20, 1)[1] FROM (VALUES ([[1.5, NULL, 2.0]]), ([[1.5, 0.0, 2.0]])) AS t (g)"
    )
    assert with_null == zeroed and len(with_null) == 20  # a NULL value counts as 0, as list_sum skips it


def _slice_values(con, run_id: str) -> dict[tuple[str, str, str], dict[str, float]]:
    """(metric, dimension, slice) -> case_id -> value of the run's `ok` scores."""
    rows = fetch(
        con,
        """SELECT s.metric, c.dimension, c.slice, s.case_id, s.value FROM scores_latest AS s
        JOIN case_slices AS c ON c.run_id = s.run_id AND c.case_id = s.case_id
        WHERE s.run_id = $run AND s.status = 'ok'""",
        run=run_id,
    )
    out: dict[tuple[str, str, str], dict[str, float]] = {}
    for metric, dimension, slice_, case_id, value in rows:
        out.setdefault((metric, dimension, slice_), {})[case_id] = value
    return out


def _intervals(con, means: list[list[float]], alpha: float) -> list[tuple[float, float]]:
    """DuckDB's own quantile_cont of each list of means (the interval's definition is unchanged)."""
    sql = """SELECT g, quantile_cont(m, $lo), quantile_cont(m, $hi)
        FROM (SELECT unnest($gs::INTEGER[]) AS g, unnest($ms::DOUBLE[]) AS m) GROUP BY g ORDER BY g"""
    groups = [g for g, row in enumerate(means) for _ in row]
    rows = fetch(con, sql, gs=groups, ms=[m for row in means for m in row], lo=alpha / 2, hi=1 - alpha / 2)
    return [(low, high) for _, low, high in rows]


def _paired(d: list[float], c: float) -> tuple[float, float | None, float | None]:
    """p-value and interval of compare_runs' header, in plain Python: z = Σd/√Σd², p = 2(1 - Φ(|z|)),
    m ± c·s/√(n - c²) (None when n ≤ c²)."""
    n, m = len(d), sum(d) / len(d)
    s2 = sum((x - m) ** 2 for x in d) / n
    sum_sq = sum(x * x for x in d)
    p = math.erfc(abs(sum(d)) / math.sqrt(sum_sq) / math.sqrt(2)) if sum_sq else 1.0
    if n <= c * c:
        return p, None, None
    half = c * math.sqrt(s2 / (n - c * c))
    return p, m - half, m + half


def _close(x: float | None, y: float | None) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, abs_tol=1e-12))


def test_compare_is_the_paired_test_of_its_header(lake_dir) -> None:
    q = open_lake(lake_dir)
    rows = q.compare("r-a", "r-b", alpha=0.1, min_pairs=3, fdr=0.2)
    a, b = _slice_values(q.con, "r-a"), _slice_values(q.con, "r-b")
    assert {r["dimension"] for r in rows} >= {"all", "category", "tag", "vault", "difficulty"}
    crit = NormalDist().inv_cdf(0.95)
    for row in rows:
        key = (row["metric"], row["dimension"], row["slice"])
        cases = sorted(set(a.get(key, {})) & set(b.get(key, {})))
        d = [b[key][c] - a[key][c] for c in cases]
        assert row["n_pairs"] == len(d)
        assert math.isclose(row["diff"], sum(d) / len(d), rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(row["mean_a"], sum(a[key][c] for c in cases) / len(d), rel_tol=1e-12)
        p, low, high = _paired(d, crit)
        bounds = get_metric(row["metric"]).bounds  # a difference lies within ±(max − min): the interval is clipped
        if None not in bounds and low is not None:
            width = bounds[1] - bounds[0]
            low, high = max(low, -width), min(high, width)
        assert math.isclose(row["p_value"], p, rel_tol=1e-9), (key, row["p_value"], p)
        assert _close(row["ci_low"], low) and _close(row["ci_high"], high), (key, row, low, high)
        assert row["tested"] == (len(d) >= 3 and row["higher_is_better"] is not None)
        # the uncorrected flag is the interval excluding 0, the same as p < alpha
        excludes = row["ci_low"] is not None and (row["ci_low"] > 0 or row["ci_high"] < 0)
        assert (row["regression_raw"] or row["improvement_raw"]) == (row["tested"] and excludes)
        assert (not row["tested"]) or excludes == (row["p_value"] < 0.1)
    assert any(r["regression_raw"] or r["improvement_raw"] for r in rows)  # the check saw both kinds of row
    assert any(r["tested"] and not (r["regression_raw"] or r["improvement_raw"]) for r in rows)


def test_metric_ci_is_the_same_plain_bootstrap(lake_dir) -> None:
    q = open_lake(lake_dir)
    rows = q.metric_ci("r-c", "any", n_boot=150, seed=2)
    c = _slice_values(q.con, "r-c")
    assert len(rows) == len(c)
    picks: dict[int, np.ndarray] = {}
    means = []
    for row in rows:
        values = [v for _, v in sorted(c[(row["metric"], row["dimension"], row["slice"])].items())]
        assert row["n"] == len(values) and math.isclose(row["mean"], sum(values) / len(values), rel_tol=1e-12)
        if len(values) not in picks:
            picks[len(values)] = _sql_picks(q.con, len(values), 150, 2)
        means.append(_plain_means(values, picks[len(values)]))
    assert [(r["ci_low"], r["ci_high"]) for r in rows] == _intervals(q.con, means, 0.05)


def test_every_row_is_identical_on_every_call_connection_and_thread_count(lake_dir, monkeypatch) -> None:
    first = open_lake(lake_dir)
    compare, ci = first.compare("r-a", "r-c"), first.metric_ci("r-a", "category", seed=4)
    assert compare and any(r["ci_low"] != r["ci_high"] for r in compare)
    assert first.compare("r-a", "r-c") == compare
    assert open_lake(lake_dir).compare("r-a", "r-c") == compare
    plain_connect = duckdb.connect
    monkeypatch.setattr(duckdb, "connect", lambda *a, **k: plain_connect(config={"threads": 1}))
    single = open_lake(lake_dir)
    assert fetch(single.con, "SELECT current_setting('threads')") == [(1,)]
    assert single.compare("r-a", "r-c") == compare
    assert single.metric_ci("r-a", "category", seed=4) == ci
    assert first.metric_ci("r-a", "category", seed=5) != ci  # the seed matters


def test_the_labels_name_the_comparisons_own_level(lake_dir) -> None:
    """compare(alpha=0.1) is a 90% interval: the labels and the `why` texts said 95% whatever alpha was."""
    from raglake.analysis import interval, verdict_summary

    q = open_lake(lake_dir)
    rows = q.compare("r-a", "r-b", alpha=0.1, min_pairs=3, fdr=0.2)
    assert all(interval(r).startswith("90% CI") for r in rows)
    assert "90% interval" in verdict_summary(rows, 0.2) and "95%" not in verdict_summary(rows, 0.2)
    assert not any("95%" in (r["why"] or "") for r in rows)
    assert any("90% CI" in (r["why"] or "") for r in rows)
