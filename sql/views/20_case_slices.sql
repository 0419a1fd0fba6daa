-- case_slices: every case of every run in every slice it belongs to, one row per (dimension, slice).
-- A case with several tags counts once in each tag; `all` holds every case.
CREATE OR REPLACE VIEW case_slices AS
WITH base AS (
    SELECT
        cases.run_id,
        cases.case_id,
        coalesce(cases.category, '(none)') AS category,
        coalesce(cases.difficulty, '(none)') AS difficulty,
        coalesce(cases.vault, '(none)') AS vault,
        CASE WHEN cases.answerable THEN 'answerable' ELSE 'unanswerable' END AS answerable,
        runs.target_name AS target,
        coalesce(cases.method, '(none)') AS method,
        CASE WHEN len(cases.tags) > 0 THEN cases.tags ELSE ['(untagged)'] END AS tags
    FROM cases
    INNER JOIN runs ON cases.run_id = runs.run_id
),

final AS (
    SELECT run_id, case_id, 'all' AS dimension, 'all' AS slice FROM base
    UNION ALL SELECT run_id, case_id, 'category', category FROM base
    UNION ALL SELECT run_id, case_id, 'difficulty', difficulty FROM base
    UNION ALL SELECT run_id, case_id, 'vault', vault FROM base
    UNION ALL SELECT run_id, case_id, 'answerable', answerable FROM base
    UNION ALL SELECT run_id, case_id, 'target', target FROM base
    UNION ALL SELECT run_id, case_id, 'method', method FROM base
    UNION ALL SELECT run_id, case_id, 'tag', unnest(tags) FROM base
)

SELECT * FROM final;
