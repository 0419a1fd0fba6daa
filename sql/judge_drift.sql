-- judge_drift: did the model behind a judge name change? A judge is pinned by name only (`model` in the
-- request); each reply names the model that answered (`reply_model`) and, with many providers, a
-- `system_fingerprint` of the serving configuration. For every judge name, the models and fingerprints
-- its replies named in each run of $run_ids, and a row wherever they differ: between consecutive runs of
-- the list that called that judge (in the list's order: baseline first), or within one run that got more
-- than one. A side with no value (an older lake, a server that sends none) is no evidence of a change.
-- Only calls made are seen: a run answered wholly from the ledger re-used earlier replies.
-- Parameters: $run_ids (in order, e.g. [baseline, candidate]).
WITH served AS (
    SELECT
        judge_calls.run_id,
        judge_calls.model AS judge,
        list_position($run_ids, judge_calls.run_id) AS run_order,
        list_sort(list_distinct(list(judge_calls.reply_model) FILTER (WHERE judge_calls.reply_model IS NOT NULL)))
            AS models,
        list_sort(
            list_distinct(
                list(judge_calls.system_fingerprint) FILTER (WHERE judge_calls.system_fingerprint IS NOT NULL)
            )
        ) AS fingerprints,
        count(*) AS n_calls
    FROM judge_calls
    WHERE list_contains($run_ids, judge_calls.run_id)
    GROUP BY judge_calls.run_id, judge_calls.model
),

paired AS (
    SELECT
        judge,
        lag(run_id) OVER by_judge AS run_before,
        run_id AS run_after,
        lag(models) OVER by_judge AS models_before,
        models AS models_after,
        lag(fingerprints) OVER by_judge AS fingerprints_before,
        fingerprints AS fingerprints_after,
        lag(n_calls) OVER by_judge AS calls_before,
        n_calls AS calls_after,
        run_order
    FROM served
    WINDOW by_judge AS (PARTITION BY judge ORDER BY run_order)
),

between_runs AS (
    SELECT
        *,
        len(models_before) > 0 AND len(models_after) > 0 AND models_before <> models_after AS model_changed,
        len(fingerprints_before) > 0 AND len(fingerprints_after) > 0
        AND fingerprints_before <> fingerprints_after AS fingerprint_changed,
        'between runs' AS scope
    FROM paired
    WHERE run_before IS NOT NULL
),

within_run AS (
    SELECT
        judge,
        run_id AS run_before,
        run_id AS run_after,
        models AS models_before,
        models AS models_after,
        fingerprints AS fingerprints_before,
        fingerprints AS fingerprints_after,
        n_calls AS calls_before,
        n_calls AS calls_after,
        run_order,
        len(models) > 1 AS model_changed,
        len(fingerprints) > 1 AS fingerprint_changed,
        'within run' AS scope
    FROM served
),

final AS (
    SELECT
        judge,
        scope,
        run_before,
        run_after,
        concat_ws(
            ', ',
            CASE WHEN model_changed THEN 'model' END,
            CASE WHEN fingerprint_changed THEN 'system_fingerprint' END
        ) AS change,
        models_before,
        models_after,
        fingerprints_before,
        fingerprints_after,
        calls_before,
        calls_after,
        run_order
    FROM (
        SELECT * FROM between_runs
        UNION ALL BY NAME
        SELECT * FROM within_run
    )
    WHERE model_changed OR fingerprint_changed
)

SELECT * EXCLUDE (run_order) FROM final
ORDER BY judge, run_order, scope;
