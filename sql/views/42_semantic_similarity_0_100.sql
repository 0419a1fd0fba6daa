-- semantic_similarity_0_100: the 0-100 presentation (seed 004) of every metric the registry gives
-- `scale_view = 'semantic_similarity_0_100'` (semantic_similarity): the stored 0-1 value × 100, rounded
-- to 2 places (half away from zero). Derived from the stored value (the newest scoring, status ok).
CREATE OR REPLACE VIEW semantic_similarity_0_100 AS
WITH declared AS (
    SELECT metric_registry.metric
    FROM metric_registry
    WHERE metric_registry.scale_view = 'semantic_similarity_0_100'
),

final AS (
    SELECT
        scores_latest.run_id,
        scores_latest.case_id,
        scores_latest.metric,
        scores_latest.value,
        round(100 * scores_latest.value, 2) AS value_0_100
    FROM scores_latest
    INNER JOIN declared ON scores_latest.metric = declared.metric
    WHERE scores_latest.status = 'ok'
)

SELECT * FROM final;
