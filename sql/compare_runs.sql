-- compare_runs: run B (candidate) against run A (baseline) for every metric and slice, paired by case,
-- with the false discovery rate controlled across the comparison's tests.
-- diff = mean_b - mean_a over the cases scored `ok` in both runs. A comparison of at most 200,000 pairs in
-- all (every metric × slice) takes each slice's means from a list of its pairs in case_id order: the same
-- to the last bit on every call, connection and thread count. A larger one takes every slice's from one
-- streaming pass, as metric_ci does for a large slice: n, compensated sums (fsum) and Welford's variance
-- (var_pop), equal to the lists' to ~1e-15 but not always to the last bit, in memory that does not grow
-- with the runs (two runs of a million cases held +4 GB of lists; tests/test_compare_large.py). For a
-- slice's n paired differences d (B - A), their mean m and s² = mean((d - m)²):
--   p_value  the paired sign-flip (randomisation) test of "A and B are exchangeable case by case", in
--            its large-sample form: z = Σd / √Σd², whose variance over random signs is exactly 1
--            (for a 0/1 metric: McNemar's test), p_value = 2·(1 - Φ(|z|)); 1 when every d is 0.
--   ci_low, ci_high  the per-slice (uncorrected) interval at level 1 - $alpha: the δ that the same
--            test does not reject on d - δ, m ± c·s / √(n - c²) with c = Φ⁻¹(1 - $alpha / 2);
--            NULL (unbounded) when n ≤ c². It excludes 0 exactly when p_value < $alpha.
--            benchmarks/interval_coverage.py measures its coverage (NOTES.md has the table).
-- The family: `tested` rows, those with a direction (the metric's higher_is_better) and at least
-- $min_pairs pairs; with $tests (a list of {metric, dimension, min_pairs}; NULL: every such row) only
-- the listed metric × dimension rows with at least their min_pairs. n_tests counts them; q_value is
-- their Benjamini-Hochberg adjusted p-value (sql/views/07_paired_tests.sql).
--   regression_raw / improvement_raw  a tested row whose uncorrected interval excludes 0 in the
--            metric's bad / good direction.
--   regression / improvement  the verdicts: a tested row with q_value ≤ $fdr in that direction
--            (Benjamini-Hochberg at level $fdr); with $fdr NULL (--fdr off), the raw flags.
--   fdr_low, fdr_high  a tested row's interval at level 1 - max(R, 1)·$fdr / n_tests, R the rows with
--            q_value ≤ $fdr (Benjamini-Yekutieli's FCR-adjusted interval): it excludes 0 exactly on
--            the rows the verdict flags. NULL with $fdr NULL.
--   Both intervals are clipped to what a difference of the metric can be, ±(scale_max - scale_min) of
--   metric_registry (a 0/1 metric's to [-1, 1]); a metric of an open scale (ms, count) is not clipped.
--   verdict  worse / better / no clear change (regression, improvement, neither); why  for no clear
--            change, the first that holds of: the metric has no better direction, no case changed (every
--            pair equal), too few pairs (fewer than $min_pairs), not among the tests $tests asks for,
--            too few pairs for an interval, the 95% CI spans 0, or (its own interval excludes 0) the
--            FDR control does not keep it (q > $fdr); NULL for worse and better.
-- Parameters: $run_a, $run_b, $alpha, $min_pairs, $fdr, $tests.
WITH slices AS (
    SELECT case_id, dimension, slice
    FROM case_slices
    WHERE run_id = $run_b AND dimension NOT IN ('target', 'method')
),

pairs AS NOT MATERIALIZED (
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

-- n, means and spread of every slice in one pass; a comparison of more than 200,000 pairs uses these
moments AS (
    SELECT
        metric,
        dimension,
        slice,
        count(*) AS n_pairs,
        fsum(value_a) / count(value_a) AS mean_a,
        fsum(value_b) / count(value_b) AS mean_b,
        fsum(d) / count(d) AS diff,
        greatest(var_pop(d), 0) AS s2,
        sum(count(*)) OVER () > 200000 AS large
    FROM pairs
    GROUP BY ALL
),

-- a smaller comparison's slices: each one's pairs as one list in case_id order (list_sort orders the
-- structs by their first field, unique in a slice: cheaper than an ordered aggregate)
slice_pairs AS (
    SELECT
        pairs.metric,
        pairs.dimension,
        pairs.slice,
        list_sort(list({'case_id': pairs.case_id, 'a': pairs.value_a, 'b': pairs.value_b, 'd': pairs.d})) AS ps
    FROM pairs
    SEMI JOIN moments
        ON pairs.metric = moments.metric
        AND pairs.dimension = moments.dimension
        AND pairs.slice = moments.slice
        AND NOT moments.large
    GROUP BY ALL
),

-- its number of pairs and means
means AS (
    SELECT
        metric,
        dimension,
        slice,
        len(ps) AS n_pairs,
        list_avg(list_transform(ps, lambda p: p.a)) AS mean_a,
        list_avg(list_transform(ps, lambda p: p.b)) AS mean_b,
        list_avg(list_transform(ps, lambda p: p.d)) AS diff,
        list_transform(ps, lambda p: p.d) AS ds
    FROM slice_pairs
),

-- the spread of the differences about their mean, s² (divided by n); a large comparison's from the moments
spread AS (
    SELECT
        metric,
        dimension,
        slice,
        n_pairs,
        mean_a,
        mean_b,
        diff,
        list_avg(list_transform(ds, lambda x: (x - diff) * (x - diff))) AS s2
    FROM means
    UNION ALL
    SELECT metric, dimension, slice, n_pairs, mean_a, mean_b, diff, s2
    FROM moments
    WHERE large
),

listed AS (
    SELECT unnest($tests::STRUCT(metric VARCHAR, dimension VARCHAR, min_pairs INTEGER)[], recursive := true)
),

-- the test, the per-slice interval and whether the row is one of the family's tests
tests AS (
    SELECT
        spread.*,
        metric_registry.family,
        metric_registry.higher_is_better,
        metric_registry.scale_max - metric_registry.scale_min AS width,
        normal_quantile(1 - $alpha / 2) AS c,
        -- z = Σd / √Σd² = √n·m / √(s² + m²)
        CASE WHEN s2 + diff * diff > 0 THEN sqrt(n_pairs) * diff / sqrt(s2 + diff * diff) ELSE 0.0 END AS z,
        metric_registry.higher_is_better IS NOT NULL
        AND n_pairs >= $min_pairs
        AND (
            $tests IS NULL
            OR EXISTS (
                SELECT 1
                FROM listed
                WHERE
                    listed.metric = spread.metric
                    AND listed.dimension = spread.dimension
                    AND spread.n_pairs >= listed.min_pairs
            )
        ) AS tested
    FROM spread
    LEFT JOIN metric_registry ON spread.metric = metric_registry.metric
),

intervals AS (
    SELECT
        *,
        2 * normal_sf(abs(z)) AS p_value,
        diff - paired_half_width(s2, n_pairs, c) AS ci_low,
        diff + paired_half_width(s2, n_pairs, c) AS ci_high,
        -- +1: the metric moved its good way, -1: its bad way, 0: not at all or it has no direction
        coalesce(sign(diff) * CASE higher_is_better WHEN TRUE THEN 1 WHEN FALSE THEN -1 END, 0) AS direction
    FROM tests
),

-- Benjamini-Hochberg over the family
adjusted AS (
    SELECT unnest(key), n_tests, q_value
    FROM bh_adjust(
        (
            SELECT list({'key': {'metric': metric, 'dimension': dimension, 'slice': slice}, 'p': p_value})
            FROM intervals
            WHERE tested
        )
    )
),

-- the FCR-adjusted level's critical value: Φ⁻¹(1 - max(R, 1)·$fdr / (2·n_tests))
fcr AS (
    SELECT normal_quantile(1 - greatest(count_if(q_value <= $fdr), 1) * $fdr / (2 * any_value(n_tests))) AS c_fdr
    FROM adjusted
),

verdicts AS (
    SELECT
        intervals.*,
        coalesce(adjusted.n_tests, 0) AS n_tests,
        adjusted.q_value,
        intervals.diff - paired_half_width(intervals.s2, intervals.n_pairs, fcr.c_fdr) AS fdr_low,
        intervals.diff + paired_half_width(intervals.s2, intervals.n_pairs, fcr.c_fdr) AS fdr_high,
        intervals.tested AND coalesce(intervals.ci_low > 0 OR intervals.ci_high < 0, FALSE) AS raw_real,
        coalesce(intervals.tested AND adjusted.q_value <= $fdr, FALSE) AS fdr_real
    FROM intervals
    LEFT JOIN adjusted
        ON intervals.metric = adjusted.metric
        AND intervals.dimension = adjusted.dimension
        AND intervals.slice = adjusted.slice
    LEFT JOIN fcr ON TRUE
),

called AS (
    SELECT
        *,
        raw_real AND direction < 0 AS regression_raw,
        raw_real AND direction > 0 AS improvement_raw,
        CASE WHEN $fdr IS NULL THEN raw_real ELSE fdr_real END AND direction < 0 AS regression,
        CASE WHEN $fdr IS NULL THEN raw_real ELSE fdr_real END AND direction > 0 AS improvement
    FROM verdicts
),

final AS (
    SELECT
        metric,
        family,
        higher_is_better,
        dimension,
        slice,
        n_pairs,
        mean_a,
        mean_b,
        diff,
        -- greatest / least skip a NULL bound (an open scale); a NULL end (unbounded) stays NULL
        CASE WHEN ci_low IS NOT NULL THEN greatest(ci_low, -width) END AS ci_low,
        CASE WHEN ci_high IS NOT NULL THEN least(ci_high, width) END AS ci_high,
        p_value,
        tested,
        n_tests,
        q_value,
        CASE WHEN tested AND fdr_low IS NOT NULL THEN greatest(fdr_low, -width) END AS fdr_low,
        CASE WHEN tested AND fdr_high IS NOT NULL THEN least(fdr_high, width) END AS fdr_high,
        regression_raw,
        improvement_raw,
        regression,
        improvement,
        CASE WHEN regression THEN 'worse' WHEN improvement THEN 'better' ELSE 'no clear change' END AS verdict,
        CASE
            WHEN regression OR improvement THEN NULL
            WHEN higher_is_better IS NULL THEN 'the metric has no better direction'
            WHEN s2 = 0 AND diff = 0 THEN 'no case changed'
            WHEN n_pairs < $min_pairs THEN printf('too few pairs (%d, fewer than %d)', n_pairs, $min_pairs)
            WHEN NOT tested THEN 'not among the tests asked for'
            WHEN ci_low IS NULL THEN printf('too few pairs for an interval (%d)', n_pairs)
            WHEN NOT raw_real THEN printf('the %g%% CI spans 0', round(100 * (1 - $alpha), 6))
            ELSE printf(
                'its %g%% CI excludes 0, but the FDR control does not keep it (q %.3f > %g)',
                round(100 * (1 - $alpha), 6), q_value, $fdr
            )
        END AS why,
        1 - $alpha AS level
    FROM called
)

SELECT * FROM final
ORDER BY dimension, slice, family, metric;
