-- bootstrap_ci(groups, n_boot, seed, alpha): the bootstrap interval of the mean of every group, for
-- metric_ci (one run's values; compare_runs' paired differences get the interval of a paired test,
-- which covers better on small slices: benchmarks/interval_coverage.py).
-- `groups` is a list of structs {key, vs}, one per group: `key` names it (any struct, handed back as
-- is) and `vs` lists its values in a fixed order (the caller orders by case_id). Each group's values,
-- in that order, are resampled $n_boot times with replacement by the seeded draws that
-- 05_resample_draws.sql defines (groups of the same size share them): `resample_means`, the numpy
-- function raglake.lake.query registers on the connection, makes those draws and sums each
-- replicate's values in draw order, in one call for all the groups; the interval is the alpha/2 and
-- 1 - alpha/2 quantiles (quantile_cont) of the resampled means.
-- One row per group: key, n (its number of values), mean, ci_low, ci_high.
CREATE OR REPLACE MACRO bootstrap_ci(groups, n_boot, seed, alpha) AS TABLE
WITH collected AS (
    SELECT groups AS all_groups
),

resampled AS (
    SELECT
        unnest(all_groups) AS grp,
        unnest(resample_means(list_transform(all_groups, lambda g: g.vs), n_boot, seed)) AS means
    FROM collected
),

final AS (
    SELECT
        grp.key AS key,
        len(grp.vs) AS n,
        list_avg(grp.vs) AS mean,
        list_aggregate(means, 'quantile_cont', alpha / 2) AS ci_low,
        list_aggregate(means, 'quantile_cont', 1 - alpha / 2) AS ci_high
    FROM resampled
)

SELECT * FROM final;
