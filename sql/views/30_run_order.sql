-- run_order: runs numbered from the newest (1) overall and within their target.
CREATE OR REPLACE VIEW run_order AS
WITH final AS (
    SELECT
        run_id,
        started_at,
        target_name,
        dataset_name,
        row_number() OVER (ORDER BY started_at DESC, run_id DESC) AS newest_rank,
        row_number() OVER (
            PARTITION BY target_name, dataset_name
            ORDER BY started_at DESC, run_id DESC
        ) AS newest_rank_in_target
    FROM runs
)

SELECT * FROM final;
