-- metaevals: every meta-evaluation in the lake (`raglake metaeval`), newest first: when it ran, its data
-- sets and label kinds, how many metrics it held against people and how many figures it has.
-- Parameters: none.
WITH final AS (
    SELECT
        metaeval_id,
        max(created_at) AS created_at,
        list_sort(list_distinct(list(dataset))) AS datasets,
        list_sort(list_distinct(list(label_kind))) AS label_kinds,
        count(DISTINCT metric) AS n_metrics,
        count(*) AS n_rows
    FROM metaeval
    GROUP BY metaeval_id
)

SELECT * FROM final
ORDER BY created_at DESC, metaeval_id DESC;
