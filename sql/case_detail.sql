-- case_detail: one case as each of the given runs saw it: the golden case (question, reference answer,
-- slices, gold supports, metadata) and the run's capture (answer, abstention, status, error, latency).
-- Parameters: $run_ids (list), $case_id.
WITH final AS (
    SELECT
        cases.run_id,
        runs.target_name,
        runs.started_at,
        cases.case_id,
        cases.question,
        cases.reference_answer,
        cases.answerable,
        cases.category,
        cases.difficulty,
        cases.tags,
        cases.vault,
        cases.expected_action,
        cases.gold_support_list,
        cases.metadata,
        cases.method,
        cases.capture_status,
        cases.capture_error,
        cases.answer,
        cases.abstained,
        cases.reference_list,
        cases.n_retrieved,
        cases.latency_total_ms,
        cases.latency_wall_ms
    FROM cases
    INNER JOIN runs ON cases.run_id = runs.run_id
    WHERE list_contains($run_ids, cases.run_id) AND cases.case_id = $case_id
)

SELECT * FROM final
ORDER BY list_position($run_ids, run_id);
