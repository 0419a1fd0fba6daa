-- breakdown: every case-level metric of the given runs, by one dimension
-- (all | category | difficulty | vault | answerable | target | method | tag).
-- Only `ok` rows are averaged; the other statuses are counted beside n, with their most common reason.
-- Parameters: $run_ids (list of run ids), $dimension.
WITH picked AS (
    SELECT *
    FROM scores_latest
    WHERE list_contains($run_ids, run_id)
),

sliced AS (
    SELECT
        picked.*,
        case_slices.slice
    FROM picked
    INNER JOIN case_slices USING (run_id, case_id)
    WHERE case_slices.dimension = $dimension
),

aggregated AS (
    SELECT
        sliced.run_id,
        sliced.slice,
        sliced.metric,
        count(*) FILTER (WHERE sliced.status = 'ok') AS n,
        avg(sliced.value) FILTER (WHERE sliced.status = 'ok') AS mean,
        count(*) FILTER (WHERE sliced.status = 'undefined') AS n_undefined,
        count(*) FILTER (WHERE sliced.status = 'skipped') AS n_skipped,
        count(*) FILTER (WHERE sliced.status IN ('judge_error', 'parse_error', 'metric_error')) AS n_failed,
        mode(sliced.reason) FILTER (WHERE sliced.status <> 'ok') AS main_reason,
        count(*) AS n_rows
    FROM sliced
    GROUP BY ALL
),

final AS (
    SELECT
        aggregated.run_id,
        runs.target_name,
        $dimension AS dimension,
        aggregated.slice,
        aggregated.metric,
        metric_registry.family,
        metric_registry.higher_is_better,
        aggregated.n,
        aggregated.mean,
        aggregated.n_undefined,
        aggregated.n_skipped,
        aggregated.n_failed,
        aggregated.main_reason,
        aggregated.n_rows
    FROM aggregated
    INNER JOIN runs ON aggregated.run_id = runs.run_id
    LEFT JOIN metric_registry ON aggregated.metric = metric_registry.metric
)

SELECT * FROM final
ORDER BY run_id, slice, family, metric;
