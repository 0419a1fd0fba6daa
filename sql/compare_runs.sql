-- compare_runs: run B (candidate) against run A (baseline) for every metric and slice, paired by case.
-- diff = mean_b - mean_a over cases scored `ok` in both runs. The 95% CI (for $alpha = 0.05) is a
-- paired bootstrap: $n_boot resamples of the paired differences with replacement, drawn by a seeded
-- hash so the same inputs always give the same interval (the macro in sql/views/06_bootstrap_ci.sql).
-- Means are averages of lists in case_id order, so they too come out the same to the last bit.
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
        b.value - a.value AS d
    FROM scores_latest AS b
    INNER JOIN scores_latest AS a
        ON a.run_id = $run_a
        AND a.case_id = b.case_id
        AND a.metric = b.metric
        AND a.status = 'ok'
    INNER JOIN slices ON b.case_id = slices.case_id
    WHERE b.run_id = $run_b AND b.status = 'ok'
),

-- every slice's pairs as one list in case_id order (list_sort orders the structs by their first
-- field, unique in a slice: cheaper than an ordered aggregate)
slice_pairs AS (
    SELECT
        metric,
        dimension,
        slice,
        list_sort(list({'case_id': case_id, 'a': value_a, 'b': value_b, 'd': d})) AS ps
    FROM pairs
    GROUP BY ALL
),

-- its means, and its differences to resample
summary AS (
    SELECT
        metric,
        dimension,
        slice,
        list_avg(list_transform(ps, lambda p: p.a)) AS mean_a,
        list_avg(list_transform(ps, lambda p: p.b)) AS mean_b,
        list_transform(ps, lambda p: p.d) AS ds
    FROM slice_pairs
),

-- every slice's number of pairs, mean difference and its interval, the differences resampled in
-- case_id order (the slice and its means ride along in the key)
intervals AS (
    SELECT unnest(key), n AS n_pairs, mean AS diff, ci_low, ci_high
    FROM bootstrap_ci(
        (
            SELECT
                list({
                    'key': {
                        'metric': metric, 'dimension': dimension, 'slice': slice, 'mean_a': mean_a, 'mean_b': mean_b
                    },
                    'vs': ds
                })
            FROM summary
        ),
        $n_boot,
        $seed,
        $alpha
    )
),

final AS (
    SELECT
        intervals.metric,
        metrics.family,
        metrics.higher_is_better,
        intervals.dimension,
        intervals.slice,
        intervals.n_pairs,
        intervals.mean_a,
        intervals.mean_b,
        intervals.diff,
        intervals.ci_low,
        intervals.ci_high,
        coalesce(
            intervals.n_pairs >= $min_pairs
            AND (
                (metrics.higher_is_better AND intervals.ci_high < 0)
                OR (NOT metrics.higher_is_better AND intervals.ci_low > 0)
            ),
            FALSE
        ) AS regression,
        coalesce(
            intervals.n_pairs >= $min_pairs
            AND (
                (metrics.higher_is_better AND intervals.ci_low > 0)
                OR (NOT metrics.higher_is_better AND intervals.ci_high < 0)
            ),
            FALSE
        ) AS improvement
    FROM intervals
    LEFT JOIN metrics ON intervals.metric = metrics.metric
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
