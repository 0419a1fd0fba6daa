-- case_judge_calls: the judge calls behind one case's scores in one run (the newest row of each call key
-- its scores name), with the metrics that read each: model, the model the reply named and its
-- system_fingerprint, prompt, status, tokens, cost, and the parsed output's reasoning.
-- Parameters: $run_id, $case_id.
WITH keyed AS (
    SELECT
        scores.judge_call AS call_key,
        list(scores.metric ORDER BY scores.metric) AS metrics
    FROM scores_latest AS scores
    WHERE scores.run_id = $run_id AND scores.case_id = $case_id AND scores.judge_call IS NOT NULL
    GROUP BY scores.judge_call
),

calls AS (
    SELECT judge_calls.*
    FROM judge_calls
    WHERE judge_calls.call_key IN (SELECT keyed.call_key FROM keyed)
    QUALIFY row_number() OVER (PARTITION BY judge_calls.call_key ORDER BY judge_calls.created_at DESC) = 1
),

final AS (
    SELECT
        keyed.call_key,
        keyed.metrics,
        calls.created_at,
        calls.run_id AS paid_by_run,
        calls.model,
        calls.reply_model,
        calls.system_fingerprint,
        calls.prompt_id,
        calls.prompt_version,
        calls.status,
        calls.error,
        calls.prompt_tokens,
        calls.completion_tokens,
        calls.cost_usd,
        calls.price_known,
        calls.latency_ms,
        json_extract_string(calls.output, '$.reasoning') AS reasoning
    FROM keyed
    LEFT JOIN calls ON keyed.call_key = calls.call_key
)

SELECT * FROM final
ORDER BY prompt_id, call_key;
