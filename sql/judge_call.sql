-- judge_call: every stored row of one judge call (its ledger key), newest first: the raw request (the
-- rendered prompt) and response, the parsed output, the model asked and the one the reply named, its
-- system_fingerprint, tokens, cost, latency and retries. Parameters: $call_key.
WITH final AS (
    SELECT
        judge_calls.call_key,
        judge_calls.created_at,
        judge_calls.run_id,
        judge_calls.model,
        judge_calls.base_url,
        judge_calls.prompt_id,
        judge_calls.prompt_version,
        judge_calls.sampling_params,
        judge_calls.request,
        judge_calls.response,
        judge_calls.reply_model,
        judge_calls.system_fingerprint,
        judge_calls.output,
        judge_calls.status,
        judge_calls.error,
        judge_calls.attempts,
        judge_calls.retries,
        judge_calls.repaired,
        judge_calls.truncated_retry,
        judge_calls.prompt_tokens,
        judge_calls.completion_tokens,
        judge_calls.latency_ms,
        judge_calls.cost_usd,
        judge_calls.price_known
    FROM judge_calls
    WHERE judge_calls.call_key = $call_key
)

SELECT * FROM final
ORDER BY created_at DESC;
