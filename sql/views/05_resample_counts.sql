-- resample_counts(sizes, n_boot, seed): the bootstrap's resamples, shared by compare_runs and metric_ci.
-- For every group size n in the list `sizes` and every replicate r in 0..n_boot-1, `times` says how
-- often index i (0..n-1) is drawn when n values are resampled with replacement. Draws come from a
-- seeded hash, so the same inputs always give the same interval; they depend only on n, so groups of
-- the same size share them. One string is hashed: DuckDB's multi-argument hash() mixes small integers
-- so poorly that its low bits repeat across resamples.
CREATE OR REPLACE MACRO resample_counts(sizes, n_boot, seed) AS TABLE
WITH size_list AS (
    SELECT DISTINCT unnest(sizes) AS n
),

draws AS (
    SELECT
        size_list.n,
        reps.r,
        hash(concat_ws(':', seed, size_list.n, reps.r, pick.j)) % size_list.n AS i
    FROM size_list
    CROSS JOIN range(n_boot) AS reps (r)
    CROSS JOIN LATERAL range(size_list.n) AS pick (j)
),

final AS (
    SELECT n, r, i, count(*) AS times
    FROM draws
    GROUP BY ALL
)

SELECT * FROM final;
