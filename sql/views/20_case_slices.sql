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

-- an eval file's `slices: [KEY, …]` (recorded in runs.config_json's settings): a dimension meta.KEY per key,
-- the case's metadata value as the slice ('(none)' where a case has no such key)
meta_keys AS (
    SELECT
        run_id,
        unnest(from_json(json_extract(config_json, '$.settings.slices'), '["VARCHAR"]')) AS meta_key
    FROM runs
    WHERE json_type(json_extract(config_json, '$.settings.slices')) = 'ARRAY'
),

meta AS (
    SELECT
        cases.run_id,
        cases.case_id,
        'meta.' || meta_keys.meta_key AS dimension,
        coalesce(json_extract_string(cases.metadata, '$."' || meta_keys.meta_key || '"'), '(none)') AS slice
    FROM cases
    INNER JOIN meta_keys ON cases.run_id = meta_keys.run_id
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
    UNION ALL SELECT run_id, case_id, dimension, slice FROM meta
)

SELECT * FROM final;
