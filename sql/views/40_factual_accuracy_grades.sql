-- factual_accuracy_grades: the letter grade of every factual_accuracy score (seed 004: A ≥ .8,
-- B ≥ .6, C ≥ .4, D ≥ .2, else E), derived from the stored 0-1 value, never computed twice. Its metrics
-- are those the registry gives `scale_view = 'factual_accuracy_grades'` (factual_accuracy).
CREATE OR REPLACE VIEW factual_accuracy_grades AS
WITH declared AS (
    SELECT metric_registry.metric
    FROM metric_registry
    WHERE metric_registry.scale_view = 'factual_accuracy_grades'
),

final AS (
    SELECT
        scores_latest.run_id,
        scores_latest.case_id,
        scores_latest.value,
        CASE
            WHEN scores_latest.value >= 0.8 THEN 'A'
            WHEN scores_latest.value >= 0.6 THEN 'B'
            WHEN scores_latest.value >= 0.4 THEN 'C'
            WHEN scores_latest.value >= 0.2 THEN 'D'
            ELSE 'E'
        END AS grade,
        scores_latest.metric
    FROM scores_latest
    INNER JOIN declared ON scores_latest.metric = declared.metric
    WHERE scores_latest.status = 'ok'
)

SELECT * FROM final;
