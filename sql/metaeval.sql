-- metaeval: one meta-evaluation's agreement with people (`raglake metaeval`, docs/metaeval.md): per data
-- set × split × metric × statistic, the figure and its 95% bootstrap interval, with how many items it
-- rests on and how many had no ok value. Parameters: $metaeval_id ('' for the latest).
WITH chosen AS (
    SELECT coalesce(
        nullif($metaeval_id, ''),
        (SELECT metaeval.metaeval_id FROM metaeval ORDER BY metaeval.created_at DESC, metaeval.metaeval_id DESC LIMIT 1)
    ) AS metaeval_id
),

final AS (
    SELECT
        m.metaeval_id,
        m.created_at,
        m.dataset,
        m.label_kind,
        m.split,
        m.n,
        m.n_total,
        m.n_positive,
        m.n_failed,
        m.metric,
        m.metric_version,
        m.statistic,
        m.value,
        m.ci_low,
        m.ci_high,
        m.resamples,
        m.status,
        m.reason,
        m.threshold,
        m.embedder,
        m.judge_model,
        m.sample_seed
    FROM metaeval AS m
    INNER JOIN chosen ON m.metaeval_id = chosen.metaeval_id
)

SELECT * FROM final
ORDER BY dataset, split, metric, statistic;
