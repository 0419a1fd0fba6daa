-- bootstrap_ci(samples, n_boot, seed, alpha): the bootstrap interval of the mean of every group, shared
-- by compare_runs (paired differences) and metric_ci (one run's values).
-- `samples` is a list of structs {key, value}, one per observation, in a fixed order (the callers
-- order by case_id): `key` names the group (any struct, handed back as is). Each group's values, in
-- that order, are resampled $n_boot times with replacement by the seeded draws of resample_draws
-- (05_resample_draws.sql; groups of the same size share them); the interval is the alpha/2 and
-- 1 - alpha/2 quantiles (quantile_cont) of the resampled means.
-- One row per group: key, n (its number of values), mean, ci_low, ci_high.
CREATE OR REPLACE MACRO bootstrap_ci(samples, n_boot, seed, alpha) AS TABLE
WITH numbered AS (
    SELECT
        unnest(samples, recursive := FALSE) AS sample,
        generate_subscripts(samples, 1) AS i
),

-- every group's values as one list (list positions count from 1)
groups AS (
    SELECT
        sample.key AS key,
        list(sample.value ORDER BY i) AS vs,
        count(*) AS n
    FROM numbered
    GROUP BY sample.key
),

draws AS (
    SELECT * FROM resample_draws((SELECT list(DISTINCT n) FROM groups), n_boot, seed)
),

replicates AS (
    SELECT
        groups.key,
        draws.r,
        list_sum(list_transform(draws.picks, lambda p: groups.vs[p])) / groups.n AS mean_value
    FROM groups
    INNER JOIN draws ON groups.n = draws.n
),

quantiles AS (
    SELECT
        key,
        quantile_cont(mean_value, alpha / 2) AS ci_low,
        quantile_cont(mean_value, 1 - alpha / 2) AS ci_high
    FROM replicates
    GROUP BY key
),

final AS (
    SELECT
        groups.key,
        groups.n,
        list_avg(groups.vs) AS mean,
        quantiles.ci_low,
        quantiles.ci_high
    FROM groups
    INNER JOIN quantiles ON groups.key = quantiles.key
)

SELECT * FROM final;
