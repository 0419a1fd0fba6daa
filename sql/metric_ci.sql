-- metric_ci: every case-level metric of one run by slice, with n, mean and a 95% CI.
-- The CI (for $alpha = 0.05) resamples the run's `ok` values of a slice with replacement $n_boot
-- times, with seeded draws (the macro in sql/views/06_bootstrap_ci.sql): the same inputs always give
-- the same interval.
-- A slice of more than 50,000 values gets the normal interval mean ± z(1 - alpha/2)·sd/√n instead:
-- the percentile bootstrap of a mean converges to it, at that size they differ by less than the
-- bootstrap's own Monte Carlo error (tests/test_metric_ci_large.py), and resampling a million values
-- a thousand times would cost minutes; those slices need no list of their values either.
-- Both intervals are clipped to the values the metric can take (scale_min, scale_max of metric_registry;
-- the normal one can leave them near an end, e.g. a 0/1 metric whose mean is 0.9999).
-- Parameters: $run_id, $by ('all', a dimension of case_slices, or 'any'), $n_boot, $seed, $alpha.
WITH slices AS (
    SELECT case_id, dimension, slice
    FROM case_slices
    WHERE run_id = $run_id AND ($by = 'any' OR dimension = $by)
),

sliced AS (
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

-- n, mean (compensated sum) and standard deviation of every slice: one pass, no lists
moments AS (
    SELECT
        metric,
        dimension,
        slice,
        count(*) AS n,
        fsum(value) / count(*) AS mean,
        coalesce(stddev_samp(value), 0) AS sd,
        count(*) > 50000 AS large
    FROM sliced
    GROUP BY ALL
),

-- the `ok` values of every slice small enough to resample, as a list in case_id order (list_sort
-- orders the structs by their first field, unique in a slice: cheaper than an ordered aggregate)
samples AS (
    SELECT
        sliced.metric,
        sliced.dimension,
        sliced.slice,
        list_transform(list_sort(list({'case_id': sliced.case_id, 'value': sliced.value})), lambda s: s.value) AS vs
    FROM sliced
    SEMI JOIN moments
        ON sliced.metric = moments.metric
        AND sliced.dimension = moments.dimension
        AND sliced.slice = moments.slice
        AND NOT moments.large
    GROUP BY ALL
),

-- n, mean and interval of every small slice's values, resampled in case_id order
resampled AS (
    SELECT unnest(key), n, mean, ci_low, ci_high
    FROM bootstrap_ci(
        (SELECT list({'key': {'metric': metric, 'dimension': dimension, 'slice': slice}, 'vs': vs}) FROM samples),
        $n_boot,
        $seed,
        $alpha
    )
),

intervals AS (
    SELECT metric, dimension, slice, n, mean, ci_low, ci_high
    FROM resampled
    UNION ALL
    SELECT
        metric,
        dimension,
        slice,
        n,
        mean,
        mean - normal_quantile(1 - $alpha / 2) * sd / sqrt(n) AS ci_low,
        mean + normal_quantile(1 - $alpha / 2) * sd / sqrt(n) AS ci_high
    FROM moments
    WHERE large
),

final AS (
    SELECT
        intervals.metric,
        metric_registry.family,
        metric_registry.scale,
        metric_registry.higher_is_better,
        intervals.dimension,
        intervals.slice,
        intervals.n,
        intervals.mean,
        -- greatest / least skip a NULL bound (an open scale: ms, count); a NULL end stays NULL
        CASE WHEN intervals.ci_low IS NOT NULL THEN greatest(intervals.ci_low, metric_registry.scale_min) END AS ci_low,
        CASE WHEN intervals.ci_high IS NOT NULL THEN least(intervals.ci_high, metric_registry.scale_max) END AS ci_high
    FROM intervals
    LEFT JOIN metric_registry ON intervals.metric = metric_registry.metric
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
