-- metaeval: one meta-evaluation's agreement with people (`raglake metaeval`, docs/metaeval.md): per data
-- set × split × metric × statistic, the figure and its 95% bootstrap interval, with how many items it
-- rests on and how many had no ok value. `repeats` names what a row repeats, where it carries nothing of
-- its own (the CLI and the report leave it out; the lake keeps it): `balanced_accuracy` for the AUROC of
-- a metric that decides 0/1 (its AUROC is its balanced accuracy, same figure and interval), or the metric
-- the registry's `same_as` says it gives the same figure as, when that one was measured on the data set too.
-- Parameters: $metaeval_id ('' for the latest).
WITH chosen AS (
    SELECT coalesce(
        nullif($metaeval_id, ''),
        (SELECT metaeval.metaeval_id FROM metaeval ORDER BY metaeval.created_at DESC, metaeval.metaeval_id DESC LIMIT 1)
    ) AS metaeval_id
),

picked AS (
    SELECT m.*
    FROM metaeval AS m
    INNER JOIN chosen ON m.metaeval_id = chosen.metaeval_id
),

decided AS (
    SELECT
        picked.dataset,
        picked.split,
        picked.metric,
        picked.value,
        picked.ci_low,
        picked.ci_high
    FROM picked
    WHERE picked.statistic = 'balanced_accuracy'
),

measured AS (
    SELECT DISTINCT
        picked.dataset,
        picked.metric
    FROM picked
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
        m.sample_seed,
        CASE
            WHEN d.metric IS NOT NULL THEN 'balanced_accuracy'
            WHEN other.metric IS NOT NULL THEN other.metric
        END AS repeats
    FROM picked AS m
    LEFT JOIN decided AS d
        ON
            m.statistic = 'auroc'
            AND d.dataset = m.dataset
            AND d.split = m.split
            AND d.metric = m.metric
            AND (d.value IS NOT DISTINCT FROM m.value OR abs(d.value - m.value) <= 1e-9)
            AND (d.ci_low IS NOT DISTINCT FROM m.ci_low OR abs(d.ci_low - m.ci_low) <= 1e-9)
            AND (d.ci_high IS NOT DISTINCT FROM m.ci_high OR abs(d.ci_high - m.ci_high) <= 1e-9)
    LEFT JOIN metric_registry AS reg ON m.metric = reg.metric
    LEFT JOIN measured AS other ON m.dataset = other.dataset AND reg.same_as = other.metric
)

SELECT * FROM final
ORDER BY dataset, split, metric, statistic;
