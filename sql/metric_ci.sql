-- metric_ci: every case-level metric of one run by slice, with n, mean and a bootstrap 95% CI.
-- The CI (for $alpha = 0.05) resamples the run's `ok` values of a slice with replacement $n_boot
-- times, with the seeded draws that compare_runs uses (the macro in sql/views/06_bootstrap_ci.sql).
-- Parameters: $run_id, $by ('all', a dimension of case_slices, or 'any'), $n_boot, $seed, $alpha.
WITH slices AS (
    SELECT case_id, dimension, slice
    FROM case_slices
    WHERE run_id = $run_id AND ($by = 'any' OR dimension = $by)
),

-- the run's `ok` values of every metric and slice, as a list in case_id order (list_sort orders the
-- structs by their first field, unique in a slice: cheaper than an ordered aggregate)
samples AS (
    SELECT
        scores.metric,
        slices.dimension,
        slices.slice,
        list_transform(list_sort(list({'case_id': scores.case_id, 'value': scores.value})), lambda s: s.value) AS vs
    FROM scores_latest AS scores
    INNER JOIN slices ON scores.case_id = slices.case_id
    WHERE scores.run_id = $run_id AND scores.status = 'ok'
    GROUP BY ALL
),

-- n, mean and interval of every slice's values, resampled in case_id order
intervals AS (
    SELECT unnest(key), n, mean, ci_low, ci_high
    FROM bootstrap_ci(
        (SELECT list({'key': {'metric': metric, 'dimension': dimension, 'slice': slice}, 'vs': vs}) FROM samples),
        $n_boot,
        $seed,
        $alpha
    )
),

final AS (
    SELECT
        intervals.metric,
        metrics.family,
        metrics.scale,
        metrics.higher_is_better,
        intervals.dimension,
        intervals.slice,
        intervals.n,
        intervals.mean,
        intervals.ci_low,
        intervals.ci_high
    FROM intervals
    LEFT JOIN metrics ON intervals.metric = metrics.metric
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
