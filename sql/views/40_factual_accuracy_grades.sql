-- factual_accuracy_grades: the letter grade of every factual_accuracy score (seed 004: A ≥ .8,
-- B ≥ .6, C ≥ .4, D ≥ .2, else E), derived from the stored 0-1 value, never computed twice.
CREATE OR REPLACE VIEW factual_accuracy_grades AS
WITH final AS (
    SELECT
        run_id,
        case_id,
        value,
        CASE
            WHEN value >= 0.8 THEN 'A'
            WHEN value >= 0.6 THEN 'B'
            WHEN value >= 0.4 THEN 'C'
            WHEN value >= 0.2 THEN 'D'
            ELSE 'E'
        END AS grade
    FROM scores_latest
    WHERE metric = 'factual_accuracy' AND status = 'ok'
)

SELECT * FROM final;
