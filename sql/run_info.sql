-- run_info: what a report says about each run: its target, golden set, when it ran, the embedder,
-- the judge model(s), the prompt versions and the index it searched. Parameters: $run_ids.
WITH final AS (
    SELECT
        runs.run_id,
        runs.target_name,
        runs.target_spec,
        runs.target_kind,
        runs.dataset_name,
        runs.dataset_path,
        runs.dataset_hash,
        runs.n_cases,
        runs.k,
        runs.status,
        runs.started_at,
        runs.finished_at,
        runs.embedder,
        runs.judge_models,
        runs.prompt_version_map,
        runs.index_version,
        runs.code_version
    FROM runs
    WHERE list_contains($run_ids, runs.run_id)
)

SELECT * FROM final
ORDER BY started_at, run_id;
