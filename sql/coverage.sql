-- coverage: the index manifest of a run (METRICS.md §6): docs and chunks, skips with reasons,
-- tokens per chunk, by doc type. Parameters: $run_id.
WITH final AS (
    SELECT
        coverage.run_id,
        coverage.index_version,
        coverage.stat,
        coverage.doc_type,
        coverage.reason,
        coverage.value
    FROM coverage
    WHERE coverage.run_id = $run_id
)

SELECT * FROM final
ORDER BY doc_type NULLS FIRST, stat, reason NULLS FIRST;
