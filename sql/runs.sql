-- runs: every committed run, newest first, with its case count and target (the runs file's columns).
-- Parameters: $limit.
WITH final AS (
    SELECT
        runs.run_id,
        runs.started_at,
        runs.finished_at,
        runs.target_name,
        runs.target_spec,
        runs.dataset_name,
        runs.dataset_hash,
        runs.n_cases,
        runs.k,
        runs.status
    FROM runs
)

SELECT * FROM final
ORDER BY started_at DESC, run_id DESC
LIMIT $limit;
