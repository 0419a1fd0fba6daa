-- wp_scores_1_5: the white paper's 1-5 presentation (seed 002) of every metric the registry gives
-- `scale_view = 'wp_scores_1_5'`: a 0-1 share (faithfulness, precision, recall) shown as 1 + 4x, a judge
-- score already on 1-5 (correctness, relevance, the composite) as it is. Derived from the stored value
-- (the newest scoring, status ok), never computed twice.
CREATE OR REPLACE VIEW wp_scores_1_5 AS
WITH declared AS (
    SELECT
        metric_registry.metric,
        metric_registry.scale
    FROM metric_registry
    WHERE metric_registry.scale_view = 'wp_scores_1_5'
),

final AS (
    SELECT
        scores_latest.run_id,
        scores_latest.case_id,
        scores_latest.metric,
        scores_latest.value,
        CASE declared.scale
            WHEN '0-1' THEN 1 + 4 * scores_latest.value
            WHEN '1-5' THEN scores_latest.value
        END AS value_1_5
    FROM scores_latest
    INNER JOIN declared ON scores_latest.metric = declared.metric
    WHERE scores_latest.status = 'ok'
)

SELECT * FROM final;
