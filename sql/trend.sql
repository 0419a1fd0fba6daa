-- trend: one metric (or all when $metric is NULL) over runs, oldest first, for one slice dimension.
-- Parameters: $metric, $target (NULL for every target), $dataset (NULL for every dataset), $dimension.
WITH picked_runs AS (
    SELECT run_id, started_at, target_name, dataset_name
    FROM runs
    WHERE ($target IS NULL OR target_name = $target)
        AND ($dataset IS NULL OR dataset_name = $dataset)
),

sliced AS (
    SELECT
        picked_runs.run_id,
        picked_runs.started_at,
        picked_runs.target_name,
        picked_runs.dataset_name,
        case_slices.slice,
        scores_latest.metric,
        scores_latest.value,
        scores_latest.status
    FROM scores_latest
    INNER JOIN picked_runs ON scores_latest.run_id = picked_runs.run_id
    INNER JOIN case_slices
        ON scores_latest.run_id = case_slices.run_id
        AND scores_latest.case_id = case_slices.case_id
        AND case_slices.dimension = $dimension
    WHERE $metric IS NULL OR scores_latest.metric = $metric
),

final AS (
    SELECT
        run_id,
        started_at,
        target_name,
        dataset_name,
        slice,
        metric,
        count(*) FILTER (WHERE status = 'ok') AS n,
        avg(value) FILTER (WHERE status = 'ok') AS mean
    FROM sliced
    GROUP BY ALL
)

SELECT * FROM final
ORDER BY metric, slice, started_at, run_id;
