-- case_chunks: the chunks one run retrieved for one case, in rank order, each with the gold supports it
-- matches (their index in the case's gold_support_list, from 0, and their path and heading).
-- Parameters: $run_id, $case_id.
WITH gold AS (
    SELECT coalesce(cases.gold_support_list, []) AS supports
    FROM cases
    WHERE cases.run_id = $run_id AND cases.case_id = $case_id
),

final AS (
    SELECT
        chunks.rank,
        chunks.rel_path,
        chunks.heading_path,
        chunks.text,
        chunks.score,
        chunks.chunk_id,
        chunks.in_top_k,
        coalesce(chunks.matched_supports, []) AS matched_supports,
        list_transform(
            coalesce(chunks.matched_supports, []),
            lambda i: {'index': i, 'rel_path': gold.supports[i + 1].rel_path, 'heading_path': gold.supports[i + 1].heading_path}
        ) AS gold_matches
    FROM chunks
    LEFT JOIN gold ON TRUE
    WHERE chunks.run_id = $run_id AND chunks.case_id = $case_id
)

SELECT * FROM final
ORDER BY rank;
