-- run_figures: the run-level figures (latency percentiles per stage, failure rates, timings).
-- Parameters: $run_ids.
WITH final AS (
    SELECT
        run_metrics.run_id,
        run_metrics.metric,
        run_metrics.stage,
        run_metrics.value,
        run_metrics.n,
        run_metrics.unit
    FROM run_metrics
    WHERE list_contains($run_ids, run_metrics.run_id)
)

SELECT * FROM final
ORDER BY run_id, metric, stage;
