"""The Arrow shapes golden cases and captures are read into: raglake's record models (raglake.schemas)
field for field, with a heading path as a list of segments (as `model_dump_json` writes it) or as one
string ("A > B", as people write it). A test holds these to the pydantic models' fields."""

from __future__ import annotations

import pyarrow as pa

from raglake.schemas import ANSWER_LABELS, CHUNK_LABELS, LATENCY_STAGES

_STR = pa.string()
_INT = pa.int64()
HEADING_FORMS = ("list", "string")


def _anchor(heading: pa.DataType) -> list[pa.Field]:
    return [pa.field("rel_path", _STR), pa.field("heading_path", heading)]


def golden_schema(heading: pa.DataType) -> pa.Schema:
    """A golden case line; `metadata` is free-form and left to the reader's inference."""
    support = pa.struct([*_anchor(heading), ("snippets", pa.list_(_STR)), ("date", _STR), ("required", pa.bool_())])
    chunk_label = pa.struct([*_anchor(heading), *((n, _INT) for n in CHUNK_LABELS)])
    answer_label = pa.struct([("method", _STR), ("answer_sha256", _STR), *((n, _INT) for n in ANSWER_LABELS)])
    labels = pa.struct([("chunks", pa.list_(chunk_label)), ("answers", pa.list_(answer_label))])
    return pa.schema(
        [
            ("id", _STR),
            ("question", _STR),
            ("reference_answer", _STR),
            ("answerable", pa.bool_()),
            ("category", _STR),
            ("difficulty", _STR),
            ("tags", pa.list_(_STR)),
            ("vault", _STR),
            ("expected_action", _STR),
            ("gold_supports", pa.list_(support)),
            ("required_support_groups", pa.list_(pa.list_(_INT))),
            ("recency_conflict_rule", _STR),
            ("labels", labels),
        ]
    )


def capture_schema(heading: pa.DataType) -> pa.Schema:
    chunk = pa.struct([*_anchor(heading), ("rank", _INT), ("text", _STR), ("score", pa.float64()), ("chunk_id", _STR)])
    return pa.schema(
        [
            ("case_id", _STR),
            ("answer", _STR),
            ("abstained", pa.bool_()),
            ("references", pa.list_(pa.struct(_anchor(heading)))),
            ("retrieved", pa.list_(chunk)),
            ("method", _STR),
            ("status", _STR),
            ("error", _STR),
            ("latency_ms", pa.struct([(s, pa.float64()) for s in LATENCY_STAGES])),
            ("folder_mode", _STR),
            ("selected_folders", pa.list_(_STR)),
            ("attempts", _INT),
            ("cost_usd", pa.float64()),
        ]
    )


def heading_type(form: str) -> pa.DataType:
    return pa.list_(_STR) if form == "list" else _STR


# golden fields whose content the reader infers and scoring never reads in columns: metadata, and a case's
# own assertions (`assert`, or its field name `assertions`), which a metric reads from the case's model
GOLDEN_FREE_FORM = ("assert", "assertions", "metadata")
# fields that may be absent (a default applies) but not null: a null read for one of them is checked on the line
NOT_NULL_WITH_DEFAULT = (
    "answerable",
    "tags",
    "gold_supports",
    "required_support_groups",
    "metadata",
    "snippets",
    "required",
    "chunks",
    "answers",
    "references",
    "retrieved",
    "status",
    "latency_ms",
    "selected_folders",
    "text",
)
