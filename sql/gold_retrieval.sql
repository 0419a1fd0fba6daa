-- gold_retrieval: which gold supports each run retrieved for each case of $case_ids: one row per case ×
-- gold support (its index in the case's gold_support_list, from 0, path and heading) × run of $run_ids,
-- with the best rank of a chunk of the run that matches it within the run's top k (`rank_in_top_k`; NULL:
-- missed) and at any rank. The supports are those of the first run of $run_ids that holds the case.
-- Parameters: $run_ids (list, e.g. [baseline, candidate]), $case_ids (list).
WITH golden AS (
    SELECT cases.case_id, cases.gold_support_list
    FROM cases
    WHERE list_contains($run_ids, cases.run_id) AND list_contains($case_ids, cases.case_id)
    QUALIFY row_number() OVER (PARTITION BY cases.case_id ORDER BY list_position($run_ids, cases.run_id)) = 1
),

supports AS (
    SELECT
        case_id,
        unnest(range(len(coalesce(gold_support_list, [])))) AS support_index,
        unnest(coalesce(gold_support_list, [])) AS support
    FROM golden
),

matched AS (
    SELECT
        chunks.run_id,
        chunks.case_id,
        unnest(chunks.matched_supports) AS support_index,
        chunks.rank,
        chunks.in_top_k
    FROM chunks
    WHERE list_contains($run_ids, chunks.run_id) AND list_contains($case_ids, chunks.case_id)
),

best AS (
    SELECT
        run_id,
        case_id,
        support_index,
        min(rank) FILTER (WHERE in_top_k) AS rank_in_top_k,
        min(rank) AS best_rank
    FROM matched
    GROUP BY ALL
),

picked_runs AS (
    SELECT unnest($run_ids) AS run_id
),

final AS (
    SELECT
        supports.case_id,
        supports.support_index,
        supports.support.rel_path AS rel_path,
        supports.support.heading_path AS heading_path,
        picked_runs.run_id,
        best.rank_in_top_k,
        best.best_rank
    FROM supports
    CROSS JOIN picked_runs
    LEFT JOIN best
        ON supports.case_id = best.case_id
        AND supports.support_index = best.support_index
        AND picked_runs.run_id = best.run_id
)

SELECT * FROM final
ORDER BY case_id, support_index, list_position($run_ids, run_id);
