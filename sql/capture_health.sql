-- capture_health: capture failures by slice (error, timeout, empty answer, abstained) for the given runs.
-- Parameters: $run_ids, $dimension.
WITH sliced AS (
    SELECT
        cases.run_id,
        case_slices.slice,
        cases.capture_status,
        cases.abstained
    FROM cases
    INNER JOIN case_slices USING (run_id, case_id)
    WHERE list_contains($run_ids, cases.run_id) AND case_slices.dimension = $dimension
),

final AS (
    SELECT
        run_id,
        slice,
        count(*) AS n_cases,
        avg(CASE WHEN capture_status = 'error' THEN 1.0 ELSE 0.0 END) AS error_rate,
        avg(CASE WHEN capture_status = 'timeout' THEN 1.0 ELSE 0.0 END) AS timeout_rate,
        avg(CASE WHEN capture_status = 'empty' THEN 1.0 ELSE 0.0 END) AS empty_response_rate,
        avg(CASE WHEN abstained THEN 1.0 ELSE 0.0 END) AS abstained_rate
    FROM sliced
    GROUP BY ALL
)

SELECT * FROM final
ORDER BY run_id, slice;
