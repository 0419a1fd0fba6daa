-- scores_latest: the newest scoring of every run × case × metric (older scorings stay in `scores`).
CREATE OR REPLACE VIEW scores_latest AS
WITH ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY run_id, case_id, metric
            ORDER BY scored_at DESC, scoring_id DESC
        ) AS recency
    FROM scores
),

final AS (
    SELECT * EXCLUDE (recency)
    FROM ranked
    WHERE recency = 1
)

SELECT * FROM final;
