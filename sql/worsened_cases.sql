-- worsened_cases: the cases that got worse from run A (baseline) to run B (candidate): for each of the
-- given metrics, the $n cases scored `ok` in both runs whose value moved the metric's bad way the most
-- (harm = A - B where higher is better, B - A where lower is better; only harm > 0; ties by case id),
-- with the question, the reference answer and both runs' answers side by side.
-- Parameters: $run_a, $run_b, $metrics (list of metric names), $n.
WITH pairs AS (
    SELECT
        b.metric,
        b.case_id,
        a.value AS value_a,
        b.value AS value_b,
        metric_registry.higher_is_better,
        CASE WHEN metric_registry.higher_is_better THEN a.value - b.value ELSE b.value - a.value END AS harm
    FROM scores_latest AS b
    INNER JOIN scores_latest AS a
        ON a.run_id = $run_a
        AND a.case_id = b.case_id
        AND a.metric = b.metric
        AND a.status = 'ok'
    INNER JOIN metric_registry ON b.metric = metric_registry.metric
    WHERE
        b.run_id = $run_b
        AND b.status = 'ok'
        AND list_contains($metrics, b.metric)
        AND metric_registry.higher_is_better IS NOT NULL
),

ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY metric ORDER BY harm DESC, case_id) AS worse_rank
    FROM pairs
    WHERE harm > 0
),

final AS (
    SELECT
        ranked.metric,
        ranked.worse_rank,
        ranked.case_id,
        ranked.value_a,
        ranked.value_b,
        ranked.value_b - ranked.value_a AS diff,
        ranked.higher_is_better,
        case_b.question,
        case_b.reference_answer,
        case_b.category,
        case_a.answer AS answer_a,
        case_b.answer AS answer_b,
        case_a.abstained AS abstained_a,
        case_b.abstained AS abstained_b,
        case_a.capture_status AS capture_status_a,
        case_b.capture_status AS capture_status_b
    FROM ranked
    INNER JOIN cases AS case_b ON case_b.run_id = $run_b AND ranked.case_id = case_b.case_id
    LEFT JOIN cases AS case_a ON case_a.run_id = $run_a AND ranked.case_id = case_a.case_id
    WHERE ranked.worse_rank <= $n
)

SELECT * FROM final
ORDER BY metric, worse_rank;
