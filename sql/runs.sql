-- runs: every committed run, newest first, with its case count and target.
-- Parameters: $limit.
WITH final AS (
    SELECT
        runs.run_id,
        runs.started_at,
        runs.finished_at,
        coalesce(runs.target_name, runs.target_spec) AS target,
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
