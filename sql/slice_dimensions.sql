-- slice_dimensions: the dimensions one run's cases can be broken down by (the built-in ones, and the meta.*
-- keys its eval file named in `slices:`), each with how many slices it has. Parameters: $run_id.
WITH final AS (
    SELECT
        case_slices.dimension,
        count(DISTINCT case_slices.slice) AS n_slices,
        case_slices.dimension LIKE 'meta.%' AS from_metadata
    FROM case_slices
    WHERE case_slices.run_id = $run_id AND case_slices.dimension <> 'all'
    GROUP BY case_slices.dimension
)

SELECT * FROM final
ORDER BY from_metadata, dimension;
