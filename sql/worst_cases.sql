-- worst_cases: for each of the given metrics, the $n worst cases of one run (only `ok` values: the
-- lowest first where higher is better, the highest first where lower is better; ties by case id;
-- a case at the metric's best value, the top of its scale where higher is better or 0 where lower is
-- better, is never listed: a "worst 10" of a run where 50 cases score 1.000 lists only those below),
-- with the question, the reference answer, the system's answer, the retrieved chunks in rank order
-- and, where a judge call lies behind the value, the judge's output and its `reasoning` field.
-- Parameters: $run_id, $metrics (list of metric names), $n.
WITH scored AS (
    SELECT
        scores.metric,
        scores.case_id,
        scores.value,
        scores.judge_model,
        scores.judge_call,
        coalesce(metric_registry.higher_is_better, TRUE) AS higher_is_better,
        -- the best value the metric's scale allows (NULL: no such bound, nothing is left out)
        CASE
            WHEN coalesce(metric_registry.higher_is_better, TRUE)
                THEN CASE
                    WHEN metric_registry.scale IN ('0-1', 'binary', 'cosine') THEN 1.0
                    WHEN metric_registry.scale IN ('1-5', '0-5') THEN 5.0
                END
            WHEN metric_registry.scale IN ('0-1', 'binary', 'ms', 'seconds', 'usd') THEN 0.0
        END AS best_value
    FROM scores_latest AS scores
    LEFT JOIN metric_registry ON scores.metric = metric_registry.metric
    WHERE
        scores.run_id = $run_id
        AND scores.status = 'ok'
        AND list_contains($metrics, scores.metric)
),

below_best AS (
    SELECT *
    FROM scored
    WHERE
        best_value IS NULL
        OR (higher_is_better AND value < best_value)
        OR (NOT higher_is_better AND value > best_value)
),

ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY metric
            ORDER BY CASE WHEN higher_is_better THEN value ELSE -value END, case_id
        ) AS worst_rank
    FROM below_best
),

picked AS (
    SELECT *
    FROM ranked
    WHERE worst_rank <= $n
),

retrieved AS (
    SELECT
        chunks.case_id,
        list(
            {
                'rank': chunks.rank,
                'rel_path': chunks.rel_path,
                'heading_path': chunks.heading_path,
                'text': chunks.text,
                'score': chunks.score,
                'in_top_k': chunks.in_top_k,
                'n_matched_supports': len(coalesce(chunks.matched_supports, []))
            }
            ORDER BY chunks.rank
        ) AS chunks
    FROM chunks
    WHERE chunks.run_id = $run_id AND chunks.case_id IN (SELECT case_id FROM picked)
    GROUP BY chunks.case_id
),

calls AS (
    SELECT
        judge_calls.call_key,
        judge_calls.model,
        judge_calls.output
    FROM judge_calls
    WHERE judge_calls.call_key IN (SELECT judge_call FROM picked) AND judge_calls.status = 'ok'
    QUALIFY row_number() OVER (PARTITION BY judge_calls.call_key ORDER BY judge_calls.created_at DESC) = 1
),

final AS (
    SELECT
        picked.metric,
        picked.worst_rank,
        picked.case_id,
        picked.value,
        picked.higher_is_better,
        cases.question,
        cases.reference_answer,
        cases.answer,
        cases.abstained,
        cases.answerable,
        cases.category,
        cases.difficulty,
        cases.capture_status,
        cases.capture_error,
        retrieved.chunks,
        coalesce(calls.model, picked.judge_model) AS judge_model,
        json_extract_string(calls.output, '$.reasoning') AS judge_reasoning,
        calls.output AS judge_output
    FROM picked
    INNER JOIN cases ON cases.run_id = $run_id AND picked.case_id = cases.case_id
    LEFT JOIN retrieved ON picked.case_id = retrieved.case_id
    LEFT JOIN calls ON picked.judge_call = calls.call_key
)

SELECT * FROM final
ORDER BY metric, worst_rank;
