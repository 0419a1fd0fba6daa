-- case_scores: one run's scores, one row per case × metric (the newest scoring of each), with the
-- case's question, answers, slices and capture status and the metric's family and direction: the long
-- view of `raglake.evaluate(...).to_pandas()`. `value` is NaN unless `status` is 'ok'.
-- Parameters: $run_id.
WITH final AS (
    SELECT
        scores.run_id,
        scores.case_id,
        cases.question,
        cases.reference_answer,
        cases.answer,
        cases.category,
        cases.difficulty,
        cases.tags,
        cases.vault,
        cases.answerable,
        cases.capture_status,
        scores.metric,
        metric_registry.family,
        metric_registry.higher_is_better,
        scores.value,
        scores.status,
        scores.reason,
        scores.metric_version,
        scores.label_source,
        scores.embedder,
        scores.judge_model
    FROM scores_latest AS scores
    INNER JOIN cases ON scores.run_id = cases.run_id AND scores.case_id = cases.case_id
    LEFT JOIN metric_registry ON scores.metric = metric_registry.metric
    WHERE scores.run_id = $run_id
)

SELECT * FROM final
ORDER BY case_id, metric;
