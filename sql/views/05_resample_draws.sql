-- resample_draws(sizes, n_boot, seed): the bootstrap's resamples, shared by compare_runs and metric_ci.
-- For every group size n in the list `sizes` and every replicate r in 0..n_boot-1, `picks` lists the
-- n positions (1-based list indexes) drawn with replacement from a list of n values. Draws come
-- from a seeded hash, so the same inputs always give the same interval; they depend only on n, so
-- groups of the same size share them. Draw j hashes one string, 'seed:n:r:j' (DuckDB's
-- multi-argument hash() mixes small integers so poorly that its low bits repeat across resamples),
-- and the modulo stays in UBIGINT (a BIGINT divisor would widen it to a slow HUGEINT division).
CREATE OR REPLACE MACRO resample_draws(sizes, n_boot, seed) AS TABLE
WITH size_list AS (
    SELECT DISTINCT unnest(sizes) AS n
),

-- every draw number j as text once: the strings hashed below are prefix || j
positions AS (
    SELECT list_transform(range(coalesce(max(n), 0)), lambda j: j::VARCHAR) AS js
    FROM size_list
),

replicates AS (
    SELECT
        size_list.n,
        reps.r,
        concat_ws(':', seed, size_list.n, reps.r, '') AS prefix
    FROM size_list
    CROSS JOIN range(n_boot) AS reps (r)
),

final AS (
    SELECT
        n,
        r,
        list_transform(
            positions.js[1:n],
            lambda j: (hash(concat(prefix, j)) % n::UBIGINT)::INTEGER + 1
        ) AS picks
    FROM replicates
    CROSS JOIN positions
)

SELECT * FROM final;
