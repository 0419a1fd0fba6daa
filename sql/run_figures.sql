-- run_figures: the run-level figures (latency percentiles per stage, the judge's per prompt, failure
-- rates, timings, judge calls and cost). `price_known` stands beside judge_cost_usd: false when a judge
-- call had no price in the price table (its cost is left out, so the figure is a lower bound, or NaN
-- when no call had a price); null on every other row. `reused` is true on the target's latency rows
-- (stages $target_stages, wall included) of a run that reused an earlier run's captures (its
-- captures_reused figure > 0): those timings were measured by that earlier run, not by this one.
-- Parameters: $run_ids, $target_stages.
WITH figures AS (
    SELECT
        run_metrics.run_id,
        run_metrics.metric,
        run_metrics.stage,
        run_metrics.value,
        run_metrics.n,
        run_metrics.unit
    FROM run_metrics
    WHERE list_contains($run_ids, run_metrics.run_id)
),

priced AS (
    SELECT
        figures.run_id,
        bool_and(figures.value = 1) AS price_known
    FROM figures
    WHERE figures.metric = 'judge_price_known'
    GROUP BY figures.run_id
),

reusing AS (
    SELECT DISTINCT figures.run_id
    FROM figures
    WHERE figures.metric = 'captures_reused' AND figures.value > 0
),

final AS (
    SELECT
        figures.*,
        CASE WHEN figures.metric = 'judge_cost_usd' THEN priced.price_known END AS price_known,
        (
            reusing.run_id IS NOT NULL
            AND figures.metric LIKE 'latency_p%_ms'
            AND list_contains($target_stages, figures.stage)
        ) AS reused
    FROM figures
    LEFT JOIN priced ON figures.run_id = priced.run_id
    LEFT JOIN reusing ON figures.run_id = reusing.run_id
)

SELECT * FROM final
ORDER BY run_id, metric, stage;
