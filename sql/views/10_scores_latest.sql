-- scores_latest: the newest scoring of every run × case × metric (older scorings stay in `scores`).
-- A scoring (one scoring_id) writes one row per case for each metric it scores, all with one
-- scored_at. Where the newest scoring of a run × metric has a row for every case of the run (a run's
-- first scoring and every re-scoring do), its rows are the answer and only the small table of
-- scorings is ranked: no window over the score rows, whose cost grows with the run. Anything else (a
-- partial scoring, hand-made files) goes through the row-by-row window over that run × metric's rows.
CREATE OR REPLACE VIEW scores_latest AS
WITH scorings AS (
    SELECT run_id, metric, scoring_id, max(scored_at) AS scored_at, count(*) AS n_rows
    FROM scores
    GROUP BY ALL
),

run_cases AS (
    SELECT run_id, count(*) AS n_cases
    FROM cases
    GROUP BY ALL
),

ranked_scorings AS (
    SELECT
        scorings.*,
        run_cases.n_cases,
        row_number() OVER (
            PARTITION BY scorings.run_id, scorings.metric
            ORDER BY scorings.scored_at DESC, scorings.scoring_id DESC
        ) AS recency,
        count(*) OVER (PARTITION BY scorings.run_id, scorings.metric) AS n_scorings
    FROM scorings
    LEFT JOIN run_cases ON scorings.run_id = run_cases.run_id
),

-- run × metric whose newest scoring is the whole answer
whole AS (
    SELECT run_id, metric, scoring_id
    FROM ranked_scorings
    WHERE recency = 1 AND (n_scorings = 1 OR n_rows = n_cases)
),

-- the others: every scoring of them, ranked row by row
mixed AS (
    SELECT *
    FROM scores
    WHERE (run_id, metric) IN (
        SELECT (run_id, metric) FROM ranked_scorings WHERE recency = 1 AND NOT (n_scorings = 1 OR n_rows = n_cases)
    )
),

ranked AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY run_id, case_id, metric
            ORDER BY scored_at DESC, scoring_id DESC
        ) AS recency
    FROM mixed
),

final AS (
    SELECT scores.*
    FROM scores
    SEMI JOIN whole
        ON scores.run_id = whole.run_id AND scores.metric = whole.metric AND scores.scoring_id = whole.scoring_id
    UNION ALL
    SELECT * EXCLUDE (recency)
    FROM ranked
    WHERE recency = 1
)

SELECT * FROM final;
