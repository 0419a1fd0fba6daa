-- case_sentences: the per-sentence scores behind one case's score in one run (answer_hallucination: each
-- answer sentence's score, whether it was flagged, its best cosine to a top-K chunk sentence, the share of
-- its content words found there and the rank of the chunk it matched best), of the newest scoring that
-- wrote any. Parameters: $run_id, $case_id.
WITH picked AS (
    SELECT sentence_scores.*
    FROM sentence_scores
    WHERE sentence_scores.run_id = $run_id AND sentence_scores.case_id = $case_id
),

newest AS (
    SELECT metric, max(scoring_id) AS scoring_id
    FROM picked
    GROUP BY metric
),

final AS (
    SELECT
        picked.metric,
        picked.metric_version,
        picked.sentence_index,
        picked.sentence,
        picked.value,
        picked.flagged,
        picked.best_cos,
        picked.coverage,
        picked.best_rank
    FROM picked
    SEMI JOIN newest ON picked.metric = newest.metric AND picked.scoring_id = newest.scoring_id
)

SELECT * FROM final
ORDER BY metric, sentence_index;
