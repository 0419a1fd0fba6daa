-- registry: the metric registry as the lake reads it (the `metric_registry` view: the installed code's
-- metrics, then those only the lake's landed definitions know): family, level, scale and its bounds, the
-- better direction, which cases it scores, what it reads and its rule in one line. Parameters: none.
WITH final AS (
    SELECT
        metric,
        family,
        level,
        version,
        scale,
        scale_min,
        scale_max,
        higher_is_better,
        applies_to,
        inputs,
        description,
        origin,
        source,
        defined_here
    FROM metric_registry
)

SELECT * FROM final
ORDER BY level, family, metric;
