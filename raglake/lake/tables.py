"""The lake's tables: their pyarrow schemas (defined here once, each column with its description)
and partition columns. `docs/lake.md` is generated from these specs (`python -m raglake.docs lake`).

Partition columns live only in the hive path (`scores/run_id=r-…/part.parquet`), not in the files.
Each column's description travels in the Parquet files too (field metadata `description`), so a plain
Parquet reader sees what a column means without raglake. Nested fields of a known shape are maps, structs
and lists of structs (raglake.lake.layouts: their types, and how older lakes' JSON strings read as them);
a free-form object stays a JSON string, as its description says."""

from __future__ import annotations

import pyarrow as pa

from raglake.lake.layouts import GOLD_SUPPORT, PROMPT_VERSION_MAP, REFERENCE, SAMPLING_PARAMS, VERSION_MAP
from raglake.lake.spec import TS, TableSpec, to_arrow
from raglake.lake.spec import table_spec as _spec

__all__ = ["TABLES", "TableSpec", "to_arrow"]  # to_arrow and TableSpec: imported from here by the writers

RUN_PARTITION = "the run's id (the hive folder `run_id=…`; readers such as DuckDB and pyarrow add it as a column)"
SCORING = "the scoring that wrote the row: a run's first scoring, then one per `raglake rescore` of it"


RUNS = _spec(
    "runs",
    "run_date",
    [
        ("run_id", pa.string(), "the run's id (`raglake run --run-id`, else made from the time and the target)"),
        ("started_at", TS, "when the run started (UTC)"),
        ("finished_at", TS, "when its cases were scored (UTC); also the `scored_at` of its first scoring"),
        ("status", pa.string(), "how the run ended: `completed` (failed cases are counted in `cases`, not here)"),
        ("target_spec", pa.string(), "the target as given to `--target` (`builtin`, `http:FILE`, `replay:FILE`, …)"),
        ("target_kind", pa.string(), "the target's kind (`builtin`, `http`, `replay`, `replay-run`, …)"),
        (
            "target_name",
            pa.string(),
            "the target's display name (what `raglake runs` and the report show; raglake's views read "
            "target_spec here for runs of lakes written before the column)",
        ),
        ("dataset_name", pa.string(), "the golden set's name"),
        ("dataset_path", pa.string(), "the golden set's file as given"),
        ("dataset_hash", pa.string(), "sha256 of the golden set's canonical cases"),
        ("n_cases", pa.int64(), "how many cases the run evaluated"),
        ("k", pa.int32(), "the retrieval cut-off k of the @k metrics"),
        (
            "require_snippets",
            pa.bool_(),
            "whether a gold support matched only with its snippets (`--require-snippets`)",
        ),
        ("embedder", pa.string(), "the embedder key of the embedding metrics (null: none ran)"),
        ("judge_models", pa.string(), "the judge model(s), comma-separated (null: no judge)"),
        (
            "prompt_version_map",
            PROMPT_VERSION_MAP,
            "judge prompt id -> version, for the prompts the run's judge metrics may use "
            "(older lakes: the JSON string column `prompt_versions`)",
        ),
        ("index_version", pa.string(), "the version of the index the target searched (builtin target)"),
        (
            "index_info",
            pa.string(),
            "JSON object: what the target reports about its index (free-form: each target its own keys)",
        ),
        ("code_version", pa.string(), "raglake's version (and git commit where known) that made the run"),
        (
            "metric_version_map",
            VERSION_MAP,
            "metric -> version, for every metric the run's first scoring computed "
            "(older lakes: the JSON string column `metric_versions`)",
        ),
        (
            "config_json",
            pa.string(),
            "JSON object: the run's settings (scoring config, target config, options; free-form: it grows "
            "with every option, and a target's config is its own); `settings` holds every setting as resolved "
            "from the eval file and the command line's or the API's overrides",
        ),
        ("eval_file", pa.string(), "the eval file (raglake.yaml) the run was made from (null: none, options only)"),
        ("eval_file_sha256", pa.string(), "sha256 of the eval file's bytes when the run started"),
        (
            "committed",
            pa.bool_(),
            "true: the run is committed; its rows in every other table are final. "
            "A plain reader keeps a run's rows only where its runs row exists with committed = true",
        ),
        ("committed_at", TS, "when the run's runs row (its commit) was written (UTC)"),
    ],
    pa.date32(),
    doc="One row per committed run, written last: a run is in the lake when, and only when, its runs row is. "
    "Files of a run without a runs row (a crashed landing) are invisible to raglake's views.",
    partition_doc="the day the run started (UTC), the hive folder `run_date=YYYY-MM-DD`",
)

CASES = _spec(
    "cases",
    "run_id",
    [
        ("case_id", pa.string(), "the golden case's id"),
        ("question", pa.string(), "the question asked"),
        ("reference_answer", pa.string(), "the golden set's reference answer (null: none)"),
        ("answerable", pa.bool_(), "false: the right behaviour is to abstain"),
        ("category", pa.string(), "the golden case's category"),
        ("difficulty", pa.string(), "the golden case's difficulty"),
        ("tags", pa.list_(pa.string()), "the golden case's tags (distinct, first-seen order)"),
        ("vault", pa.string(), "the notes vault the case is about"),
        ("expected_action", pa.string(), "what the system should do (`answer`, `refuse`, …)"),
        ("recency_conflict_rule", pa.string(), "how conflicting dated supports must be handled (null: no conflict)"),
        ("n_gold_supports", pa.int32(), "how many gold supports the case lists"),
        (
            "gold_support_list",
            pa.list_(GOLD_SUPPORT),
            "the gold supports, in the golden case's order (chunks.matched_supports indexes it from 0); "
            "heading_path as `A > B` (older lakes: the JSON string column `gold_supports`)",
        ),
        ("metadata", pa.string(), "JSON object: the golden case's metadata (free-form: any keys a golden set has)"),
        ("method", pa.string(), "the retrieval method the target reported"),
        ("capture_status", pa.string(), "the capture's outcome: ok, empty, error or timeout"),
        ("capture_error", pa.string(), "the target's error when capture_status is error or timeout"),
        ("answer", pa.string(), "the system's answer"),
        ("abstained", pa.bool_(), "whether the system declined to answer (null: not reported)"),
        (
            "reference_list",
            pa.list_(REFERENCE),
            "the passages the answer cites, heading_path as `A > B` (older lakes: the JSON string column `references`)",
        ),
        ("n_retrieved", pa.int32(), "how many chunks the system retrieved"),
        ("folder_mode", pa.string(), "folder selection mode: off, on or on_with_fallback"),
        ("selected_folders", pa.list_(pa.string()), "the folders the system chose to search"),
        ("latency_folder_selection_ms", pa.float64(), "folder selection time, ms"),
        ("latency_retrieval_ms", pa.float64(), "retrieval time, ms"),
        ("latency_generation_ms", pa.float64(), "answer generation time, ms"),
        ("latency_total_ms", pa.float64(), "the target's reported total time, ms"),
        ("latency_wall_ms", pa.float64(), "wall time of the capture as raglake measured it, ms"),
        ("capture_hash", pa.string(), "sha256 (16 hex) of the capture's canonical JSON"),
        ("capture_attempts", pa.int32(), "requests the capture took (live targets; null otherwise)"),
        (
            "cost_usd",
            pa.float64(),
            "what the target said the call cost, US dollars (a replay file's `cost_usd`, an http target's mapped "
            "`response.cost_usd`); null: it said nothing, and in lakes written before the column",
        ),
        ("golden_case", pa.string(), "the whole golden case as canonical JSON (labels included), for re-scoring"),
    ],
    doc="One row per run × case: the golden case and what the system answered (its capture).",
    partition_doc=RUN_PARTITION,
)

CHUNKS = _spec(
    "chunks",
    "run_id",
    [
        ("case_id", pa.string(), "the case"),
        ("rank", pa.int32(), "the chunk's rank in the retrieval (1 = first)"),
        ("rel_path", pa.string(), "the chunk's document, relative to the vault"),
        ("heading_path", pa.string(), "the chunk's heading path (`A > B`)"),
        ("text", pa.string(), "the chunk's text"),
        ("score", pa.float64(), "the retriever's score"),
        ("chunk_id", pa.string(), "the retriever's chunk id"),
        ("in_top_k", pa.bool_(), "rank <= the run's k"),
        ("matched_supports", pa.list_(pa.int32()), "indexes of the case's gold supports the chunk matches"),
    ],
    doc="One row per run × case × retrieved chunk.",
    partition_doc=RUN_PARTITION,
)

SCORES = _spec(
    "scores",
    "run_id",
    [
        ("case_id", pa.string(), "the case"),
        ("metric", pa.string(), "the metric (its meaning: the `metrics` table, same run_id and scoring_id)"),
        ("value", pa.float64(), "the score; null unless status is ok"),
        (
            "status",
            pa.string(),
            "ok, undefined (the metric does not apply), skipped, or a failure "
            "(capture_failed, judge_error, …): a failure is never a 0",
        ),
        ("reason", pa.string(), "why the value is missing (undefined, skipped, failures)"),
        ("metric_version", pa.string(), "the metric's version when it was computed"),
        ("label_source", pa.string(), "where the labels it read came from (golden, judge, …)"),
        ("embedder", pa.string(), "the embedder key (embedding metrics)"),
        ("judge_model", pa.string(), "the judge model (judge metrics)"),
        ("prompt_id", pa.string(), "the judge prompt(s) used, `+`-joined"),
        ("prompt_version", pa.string(), "their versions, `+`-joined"),
        ("judge_call", pa.string(), "the judge_calls.call_key of the call(s) behind the score"),
        ("scoring_id", pa.string(), SCORING),
        ("scored_at", TS, "when the scoring was landed (UTC)"),
        (
            "is_latest",
            pa.bool_(),
            "true on the newest scoring's row of each run × case × metric (filter on it "
            "for current scores); older scorings' rows stay with false. Null in lakes written before the column",
        ),
    ],
    doc="One row per run × case × metric × scoring (long format). A re-scoring adds rows under a new "
    "scoring_id and flips is_latest on the rows it supersedes; nothing is deleted.",
    partition_doc=RUN_PARTITION,
)

LABELS = _spec(
    "labels",
    "run_id",
    [
        ("case_id", pa.string(), "the case"),
        ("level", pa.string(), "chunk or answer"),
        ("rank", pa.int32(), "the chunk's rank (chunk labels; null for answer labels)"),
        ("label", pa.string(), "the label's name (topically_relevant, evidence_sufficient, …)"),
        ("value", pa.int8(), "the label's value (0/1, or a grade)"),
        ("label_source", pa.string(), "golden (from the golden set) or judge"),
    ],
    doc="One row per run × case × label the metrics read (golden labels, or a judge's).",
    partition_doc=RUN_PARTITION,
)

COVERAGE = _spec(
    "coverage",
    "run_id",
    [
        ("index_version", pa.string(), "the index the figures describe"),
        ("stat", pa.string(), "the figure's name"),
        ("doc_type", pa.string(), "the document type it counts (null: all)"),
        ("reason", pa.string(), "why documents were left out (for counts of skipped documents)"),
        ("value", pa.float64(), "the figure"),
    ],
    doc="The index manifest's coverage figures of a run (builtin target only).",
    partition_doc=RUN_PARTITION,
)

RUN_METRICS = _spec(
    "run_metrics",
    "run_id",
    [
        ("metric", pa.string(), "the run-level metric (see the `metrics` table)"),
        ("stage", pa.string(), "the stage a latency or time figure is for (null: the whole run)"),
        ("value", pa.float64(), "the figure"),
        ("n", pa.int64(), "how many cases it is over"),
        ("unit", pa.string(), "its unit (ms, s, cases/s, usd, …)"),
        ("metric_version", pa.string(), "the metric's version"),
    ],
    doc="Run-level figures (latency percentiles, failure rates, costs, …), one row per metric × stage.",
    partition_doc=RUN_PARTITION,
)

JUDGE_CALLS = _spec(
    "judge_calls",
    "call_date",
    [
        ("call_key", pa.string(), "sha256 of model, prompt, version, params and rendered prompt: the ledger key"),
        ("created_at", TS, "when the call was made (UTC)"),
        ("run_id", pa.string(), "the run that paid for it"),
        ("model", pa.string(), "the judge model asked"),
        ("base_url", pa.string(), "the judge server"),
        ("prompt_id", pa.string(), "the prompt"),
        ("prompt_version", pa.int32(), "the prompt's version"),
        (
            "sampling_params",
            SAMPLING_PARAMS,
            "the sampling parameters sent (older lakes: the JSON string column `params`)",
        ),
        ("request", pa.string(), "the raw request body as JSON (kept verbatim for audit)"),
        ("response", pa.string(), "the raw response body as JSON (kept verbatim: any server's shape)"),
        ("reply_model", pa.string(), "the model the server's reply names (may differ from `model`)"),
        ("system_fingerprint", pa.string(), "the reply's system_fingerprint, when the server gives one"),
        ("output", pa.string(), "the parsed verdict as JSON (each prompt its own shape; null when the call failed)"),
        ("status", pa.string(), "ok or the failure kind (judge_error, timeout, …)"),
        ("error", pa.string(), "what went wrong"),
        ("attempts", pa.int32(), "requests made"),
        ("retries", pa.int32(), "retries among them"),
        ("repaired", pa.bool_(), "the reply needed a JSON repair"),
        ("truncated_retry", pa.bool_(), "retried after a length cut-off"),
        ("prompt_tokens", pa.int64(), "prompt tokens billed"),
        ("completion_tokens", pa.int64(), "completion tokens billed"),
        ("latency_ms", pa.float64(), "the call's time, ms"),
        ("cost_usd", pa.float64(), "its price (null when unknown)"),
        ("price_known", pa.bool_(), "whether the model's price was known"),
    ],
    pa.date32(),
    doc="The judge ledger: every judge call, paid for whether or not its run finished (so always "
    "visible, committed run or not); a later run with the same call_key reuses it.",
    partition_doc="the day the call was made (UTC), the hive folder `call_date=YYYY-MM-DD`",
)

# per-sentence scores behind a case-level score (answer_hallucination): one row per answer sentence
SENTENCE_SCORES = _spec(
    "sentence_scores",
    "run_id",
    [
        ("case_id", pa.string(), "the case"),
        ("metric", pa.string(), "the case-level metric the sentence scores make up"),
        ("metric_version", pa.string(), "its version"),
        ("sentence_index", pa.int32(), "the sentence's position in the answer (0 = first)"),
        ("sentence", pa.string(), "the sentence"),
        ("value", pa.float64(), "the sentence's score (answer_hallucination: 1 − support, higher is less supported)"),
        ("flagged", pa.bool_(), "counted as unsupported"),
        ("best_cos", pa.float64(), "its best cosine similarity to a sentence of a top-K chunk"),
        ("coverage", pa.float64(), "the share of its content words found in the top-K chunks (null: none)"),
        ("best_rank", pa.int32(), "the rank of the chunk holding its best-matching sentence"),
        ("scoring_id", pa.string(), SCORING),
    ],
    doc="Per-sentence scores behind a case-level score (answer_hallucination): one row per answer sentence.",
    partition_doc=RUN_PARTITION,
)

METRICS = _spec(
    "metrics",
    "run_id",
    [
        ("metric", pa.string(), "the metric's name (scores.metric, run_metrics.metric)"),
        ("family", pa.string(), "retrieval, answer, abstention, labels, embedding, judge, operational, …"),
        ("level", pa.string(), "case (rows in scores) or run (rows in run_metrics)"),
        ("version", pa.string(), "the rule's version (scores.metric_version of the rows it wrote)"),
        ("scale", pa.string(), "the value's range, e.g. `[0,1]`, `ms`"),
        ("higher_is_better", pa.bool_(), "true: higher is better; false: lower is better; null: neither"),
        ("direction", pa.string(), "the same in words: higher, lower or none"),
        ("seed", pa.string(), "where the rule comes from (the metric catalogue's seed)"),
        ("applies_to", pa.string(), "which cases it scores (all, answerable, unanswerable, …)"),
        ("inputs", pa.list_(pa.string()), "what it reads (a judge step as judge:<name>)"),
        ("description", pa.string(), "the rule in one line"),
        ("scale_view", pa.string(), "the SQL view that shows it on its seed's presentation scale (null: none)"),
        ("headline", pa.bool_(), "charted by slice in the report and a default column of the CLI"),
        ("origin", pa.string(), "where it is defined: builtin, plugin, entry_point, rubric or assertion"),
        ("source", pa.string(), "a user's metric: the file (and line), package or eval file that defines it"),
        ("scoring_id", pa.string(), SCORING),
        ("scored_at", TS, "when that scoring was landed (UTC)"),
    ],
    doc="What each metric of a scoring means, landed with every scoring (a run's first and every re-scoring): "
    "one row per metric it computed. Join scores on run_id, scoring_id and metric.",
    partition_doc=RUN_PARTITION,
)

# `raglake metaeval`: agreement of metrics with human labels, one row per (dataset, split, metric, statistic)
METAEVAL = _spec(
    "metaeval",
    "metaeval_id",
    [
        ("created_at", TS, "when the meta-evaluation ran (UTC)"),
        ("dataset", pa.string(), "the labelled data set"),
        ("source", pa.string(), "where the data set came from (a public set's name, or the file given with --data)"),
        ("label_kind", pa.string(), "similarity, support, correctness or preference"),
        ("split", pa.string(), "the data set's split (or `all`)"),
        ("n", pa.int64(), "items the statistic is over"),
        ("n_total", pa.int64(), "items in the data set before sampling (--max-items)"),
        ("n_positive", pa.int64(), "positive items among n (binary labels)"),
        ("n_failed", pa.int64(), "items the metric failed on (left out of n, never counted as 0)"),
        ("sample_seed", pa.int64(), "the seed of the sample and of the bootstrap"),
        ("metric", pa.string(), "the metric held against the human labels"),
        ("metric_version", pa.string(), "its version"),
        ("statistic", pa.string(), "spearman, pearson, auroc, balanced_accuracy, accuracy or kappa"),
        ("value", pa.float64(), "the statistic's value"),
        ("ci_low", pa.float64(), "lower end of its 95% bootstrap interval"),
        ("ci_high", pa.float64(), "upper end of its 95% bootstrap interval"),
        ("resamples", pa.int64(), "bootstrap resamples"),
        ("status", pa.string(), "ok, undefined, skipped (e.g. no judge) or the judge's failure status"),
        ("reason", pa.string(), "why there is no value"),
        ("threshold", pa.float64(), "the decision threshold the statistic used (binary statistics)"),
        ("embedder", pa.string(), "the embedder key (embedding metrics)"),
        ("judge_model", pa.string(), "the judge model (judge metrics)"),
        ("config_json", pa.string(), "JSON object: the meta-evaluation's settings"),
    ],
    doc="`raglake metaeval`: how far each metric agrees with human labels, one row per data set × split × "
    "metric × statistic (docs/metaeval.md).",
    partition_doc="the meta-evaluation's id (the hive folder `metaeval_id=…`)",
)

TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        RUNS,
        CASES,
        CHUNKS,
        SCORES,
        LABELS,
        COVERAGE,
        RUN_METRICS,
        JUDGE_CALLS,
        SENTENCE_SCORES,
        METRICS,
        METAEVAL,
    )
}
