-- case_metrics: every metric of one case in one run (its newest scoring): value, status, why it has no
-- value, the metric's version, and what stands behind it (labels, embedder, judge model, prompts and the
-- judge call's key in judge_calls). Parameters: $run_id, $case_id.
WITH final AS (
    SELECT
        scores.metric,
        metric_registry.family,
        metric_registry.higher_is_better,
        metric_registry.scale,
        scores.value,
        scores.status,
        scores.reason,
        scores.metric_version,
        scores.label_source,
        scores.embedder,
        scores.judge_model,
        scores.prompt_id,
        scores.prompt_version,
        scores.judge_call,
        scores.scored_at
    FROM scores_latest AS scores
    LEFT JOIN metric_registry ON scores.metric = metric_registry.metric
    WHERE scores.run_id = $run_id AND scores.case_id = $case_id
)

SELECT * FROM final
ORDER BY family, metric;
