-- run_list: the committed runs, newest first, as `raglake view`'s Runs page filters them: of target
-- $target, of golden set $dataset, started on or after day $since and on or before day $until (UTC), and
-- holding a case tagged $tag (each NULL: no filter); with how many of the run's cases carry a tag.
-- Parameters: $target, $dataset, $since, $until (dates), $tag, $limit.
WITH tagged AS (
    SELECT DISTINCT cases.run_id
    FROM cases
    WHERE $tag IS NOT NULL AND list_contains(cases.tags, $tag)
),

final AS (
    SELECT
        runs.run_id,
        runs.started_at,
        runs.finished_at,
        runs.target_name,
        runs.target_kind,
        runs.dataset_name,
        runs.n_cases,
        runs.k,
        runs.status,
        runs.judge_models,
        runs.index_version
    FROM runs
    WHERE
        ($target IS NULL OR runs.target_name = $target)
        AND ($dataset IS NULL OR runs.dataset_name = $dataset)
        AND ($since IS NULL OR CAST(runs.started_at AT TIME ZONE 'UTC' AS DATE) >= CAST($since AS DATE))
        AND ($until IS NULL OR CAST(runs.started_at AT TIME ZONE 'UTC' AS DATE) <= CAST($until AS DATE))
        AND ($tag IS NULL OR runs.run_id IN (SELECT tagged.run_id FROM tagged))
)

SELECT * FROM final
ORDER BY started_at DESC, run_id DESC
LIMIT $limit;
