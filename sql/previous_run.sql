-- previous_run: the newest run before $run_id of the same target and dataset (the "last week" to
-- compare against), or nothing. Parameters: $run_id.
WITH this_run AS (
    SELECT run_id, started_at, target_name, dataset_name
    FROM runs
    WHERE run_id = $run_id
),

final AS (
    SELECT runs.run_id, runs.started_at, runs.index_version
    FROM runs
    INNER JOIN this_run
        ON runs.target_name = this_run.target_name
        AND runs.dataset_name = this_run.dataset_name
        AND runs.started_at < this_run.started_at
)

SELECT * FROM final
ORDER BY started_at DESC, run_id DESC
LIMIT 1;
