"""metric_ci's interval for a slice of more than 50,000 values is the normal one (mean ± z·sd/√n):
at that size it agrees with the seeded percentile bootstrap to within the bootstrap's own Monte Carlo
error, and smaller slices keep the bootstrap. Run on a bare DuckDB with the views metric_ci reads."""

from __future__ import annotations

from statistics import NormalDist

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from raglake.lake.query import SQL_DIR, run_query
from raglake.lake.resample import GROUPS_TYPE, resample_means, resample_means_udf

N_LARGE, N_SMALL = 60_000, 40


def connection(values: dict[str, np.ndarray]) -> duckdb.DuckDBPyConnection:
    """`scores_latest`, `case_slices` and `metric_registry` as tables, one metric per entry of `values`, every
    case in slice all/all; the UDFs and macros a lake connection has."""
    con = duckdb.connect()
    con.create_function(
        "resample_means", resample_means_udf, [GROUPS_TYPE, "BIGINT", "BIGINT"], GROUPS_TYPE, type="arrow"
    )
    con.create_function("normal_quantile", lambda p: NormalDist().inv_cdf(p), ["DOUBLE"], "DOUBLE")
    for view in ("05_resample_draws", "06_bootstrap_ci"):
        con.execute(SQL_DIR.joinpath("views", f"{view}.sql").read_text(encoding="utf-8"))
    n = max(len(v) for v in values.values())
    ids = [f"c{i:06d}" for i in range(n)]
    slices = pa.table({"run_id": ["r"] * n, "case_id": ids, "dimension": ["all"] * n, "slice": ["all"] * n})
    scores = pa.concat_tables(
        pa.table(
            {
                "run_id": ["r"] * len(v),
                "case_id": ids[: len(v)],
                "metric": [m] * len(v),
                "value": v,
                "status": ["ok"] * len(v),
            }
        )
        for m, v in values.items()
    )
    metrics = pa.table(
        {
            "metric": list(values),
            "family": ["retrieval"] * len(values),
            "scale": ["0-1"] * len(values),
            "higher_is_better": [True] * len(values),
            # unbounded, so that the intervals compared are metric_ci's own, unclipped
            "scale_min": pa.nulls(len(values), pa.float64()),
            "scale_max": pa.nulls(len(values), pa.float64()),
        }
    )
    for name, table in (("case_slices", slices), ("scores_latest", scores), ("metric_registry", metrics)):
        con.register(f"_{name}", table)
        con.sql(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
    return con


def interval(values: np.ndarray, n_boot: int = 1000, seed: int = 0) -> tuple[float, float]:
    means = resample_means([values], n_boot, seed)[0]
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    rng = np.random.default_rng(3)
    values = {
        "binary_large": (rng.random(N_LARGE) < 0.3).astype(float),
        "skewed_large": rng.exponential(1.0, N_LARGE) ** 2 / 10,
        "small": rng.random(N_SMALL),
    }
    con = connection(values)
    got = run_query(con, "metric_ci", run_id="r", by="all", n_boot=1000, seed=0, alpha=0.05).to_pylist()
    return {r["metric"]: dict(r, values=values[r["metric"]]) for r in got}


@pytest.mark.parametrize("metric", ["binary_large", "skewed_large"])
def test_a_large_slice_gets_the_normal_interval_within_the_bootstraps_own_error(rows, metric):
    r, v = rows[metric], rows[metric]["values"]
    half = NormalDist().inv_cdf(0.975) * v.std(ddof=1) / np.sqrt(len(v))
    assert r["n"] == N_LARGE and r["mean"] == pytest.approx(v.mean(), rel=1e-12)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((v.mean() - half, v.mean() + half), rel=1e-9)
    low, high = interval(v)
    # the 2.5% and 97.5% quantiles of 1,000 resampled means move by ~0.1 half-width from seed to seed
    assert abs(r["ci_low"] - low) < 0.15 * half and abs(r["ci_high"] - high) < 0.15 * half


def test_a_small_slice_keeps_the_seeded_bootstrap(rows):
    r, v = rows["small"], rows["small"]["values"]
    assert (r["ci_low"], r["ci_high"]) == pytest.approx(interval(v), rel=1e-12)
