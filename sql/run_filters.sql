-- run_filters: the values `raglake view`'s Runs page can filter by, each with the number of runs that
-- hold it: targets, golden sets (datasets) and the cases' tags. Parameters: none.
WITH targets AS (
    SELECT 'target' AS kind, target_name AS value, count(*) AS n_runs
    FROM runs
    GROUP BY ALL
),

datasets AS (
    SELECT 'dataset' AS kind, dataset_name AS value, count(*) AS n_runs
    FROM runs
    GROUP BY ALL
),

tags AS (
    SELECT 'tag' AS kind, tag AS value, count(DISTINCT run_id) AS n_runs
    FROM (SELECT run_id, unnest(tags) AS tag FROM cases)
    GROUP BY ALL
),

final AS (
    SELECT * FROM targets
    UNION ALL SELECT * FROM datasets
    UNION ALL SELECT * FROM tags
)

SELECT * FROM final
WHERE value IS NOT NULL
ORDER BY kind, value;
