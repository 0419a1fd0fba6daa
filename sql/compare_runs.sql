-- compare_runs: run B (candidate) against run A (baseline) for every metric and slice, paired by case.
-- diff = mean_b - mean_a over cases scored `ok` in both runs. The 95% CI (for $alpha = 0.05) is a
-- paired bootstrap: $n_boot resamples of the paired differences with replacement, drawn by a seeded
-- hash so the same inputs always give the same interval (the macro in sql/views/06_bootstrap_ci.sql).
-- A slice is a regression when the metric moved the wrong way, the CI excludes zero, and it has at
-- least $min_pairs pairs.
-- Parameters: $run_a, $run_b, $n_boot, $seed, $alpha, $min_pairs.
WITH slices AS (
    SELECT case_id, dimension, slice
    FROM case_slices
    WHERE run_id = $run_b AND dimension NOT IN ('target', 'method')
),

pairs AS (
    SELECT
        b.metric,
        slices.dimension,
        slices.slice,
        b.case_id,
        a.value AS value_a,
        b.value AS value_b,
        b.value - a.value AS d,
        {'metric': b.metric, 'dimension': slices.dimension, 'slice': slices.slice} AS key
    FROM scores_latest AS b
    INNER JOIN scores_latest AS a
        ON a.run_id = $run_a
        AND a.case_id = b.case_id
        AND a.metric = b.metric
        AND a.status = 'ok'
    INNER JOIN slices ON b.case_id = slices.case_id
    WHERE b.run_id = $run_b AND b.status = 'ok'
),

-- the interval of every group's mean, its values resampled in case_id order (sql/views/06_bootstrap_ci.sql)
intervals AS (
    SELECT unnest(key), ci_low, ci_high
    FROM bootstrap_ci((SELECT list({'key': key, 'value': d} ORDER BY case_id) FROM pairs), $n_boot, $seed, $alpha)
),

summary AS (
    SELECT
        metric,
        dimension,
        slice,
        count(*) AS n_pairs,
        avg(value_a) AS mean_a,
        avg(value_b) AS mean_b,
        avg(d) AS diff
    FROM pairs
    GROUP BY ALL
),

final AS (
    SELECT
        summary.metric,
        metrics.family,
        metrics.higher_is_better,
        summary.dimension,
        summary.slice,
        summary.n_pairs,
        summary.mean_a,
        summary.mean_b,
        summary.diff,
        intervals.ci_low,
        intervals.ci_high,
        coalesce(
            summary.n_pairs >= $min_pairs
            AND (
                (metrics.higher_is_better AND intervals.ci_high < 0)
                OR (NOT metrics.higher_is_better AND intervals.ci_low > 0)
            ),
            FALSE
        ) AS regression,
        coalesce(
            summary.n_pairs >= $min_pairs
            AND (
                (metrics.higher_is_better AND intervals.ci_low > 0)
                OR (NOT metrics.higher_is_better AND intervals.ci_high < 0)
            ),
            FALSE
        ) AS improvement
    FROM summary
    LEFT JOIN intervals USING (metric, dimension, slice)
    LEFT JOIN metrics ON summary.metric = metrics.metric
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
