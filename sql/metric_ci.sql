-- metric_ci: every case-level metric of one run by slice, with n, mean and a bootstrap 95% CI.
-- The CI (for $alpha = 0.05) resamples the run's `ok` values of a slice with replacement $n_boot
-- times, with the seeded draws that compare_runs uses (sql/views/05_resample_draws.sql).
-- Parameters: $run_id, $by ('all', a dimension of case_slices, or 'any'), $n_boot, $seed, $alpha.
WITH slices AS (
    SELECT case_id, dimension, slice
    FROM case_slices
    WHERE run_id = $run_id AND ($by = 'any' OR dimension = $by)
),

values_ok AS (
    SELECT
        scores.metric,
        slices.dimension,
        slices.slice,
        scores.case_id,
        scores.value
    FROM scores_latest AS scores
    INNER JOIN slices ON scores.case_id = slices.case_id
    WHERE scores.run_id = $run_id AND scores.status = 'ok'
),

-- every group's values as one list ordered by case_id (list positions count from 1)
groups AS (
    SELECT
        metric,
        dimension,
        slice,
        count(*) AS n,
        list(value ORDER BY case_id) AS vs
    FROM values_ok
    GROUP BY ALL
),

draws AS (
    SELECT * FROM resample_draws((SELECT list(DISTINCT n) FROM groups), $n_boot, $seed)
),

replicates AS (
    SELECT
        groups.metric,
        groups.dimension,
        groups.slice,
        draws.r,
        list_sum(list_transform(draws.picks, lambda p: groups.vs[p])) / groups.n AS mean_value
    FROM groups
    INNER JOIN draws ON groups.n = draws.n
),

intervals AS (
    SELECT
        metric,
        dimension,
        slice,
        quantile_cont(mean_value, $alpha / 2) AS ci_low,
        quantile_cont(mean_value, 1 - $alpha / 2) AS ci_high
    FROM replicates
    GROUP BY ALL
),

summary AS (
    SELECT
        metric,
        dimension,
        slice,
        count(*) AS n,
        avg(value) AS mean
    FROM values_ok
    GROUP BY ALL
),

final AS (
    SELECT
        summary.metric,
        metrics.family,
        metrics.scale,
        metrics.higher_is_better,
        summary.dimension,
        summary.slice,
        summary.n,
        summary.mean,
        intervals.ci_low,
        intervals.ci_high
    FROM summary
    LEFT JOIN intervals USING (metric, dimension, slice)
    LEFT JOIN metrics ON summary.metric = metrics.metric
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
