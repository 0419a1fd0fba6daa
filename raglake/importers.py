"""Importers for the other common evaluation-file shapes: seed 003's
`question/reference_answer/answer/contexts` and RAGAS' `user_input/retrieved_contexts/response/reference`.
Each record becomes a golden case plus the capture it already holds."""

from __future__ import annotations

from typing import Any

SEED003 = "seed003"
RAGAS = "ragas"


def record_shape(data: Any) -> str | None:
    """Which foreign shape a record has, or None for raglake's own."""
    if not isinstance(data, dict):
        return None
    if "user_input" in data:
        return RAGAS
    if "contexts" in data or ("answer" in data and "question" in data and "case_id" not in data):
        return SEED003
    return None


def _case_id(data: dict[str, Any], fallback: Any) -> Any:
    """The record's id as written (the case model checks its type), or the fallback when there is none."""
    value = data.get("id", data.get("case_id"))
    return fallback if value is None or (isinstance(value, str) and value == "") else value


def _chunks(contexts: Any) -> list[dict[str, Any]]:
    if contexts is None:
        return []
    if isinstance(contexts, str):
        contexts = [contexts]
    if not isinstance(contexts, list):
        raise ValueError(f"contexts must be a list of strings, got {type(contexts).__name__}")
    for i, text in enumerate(contexts):
        if not isinstance(text, str):
            raise ValueError(f"contexts must be a list of strings, got {type(text).__name__} at contexts[{i}]")
    return [{"rank": i, "rel_path": "", "heading_path": "", "text": t} for i, t in enumerate(contexts, 1)]


def split_record(data: dict[str, Any], fallback_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(golden-case dict, capture dict) from a seed-003 or RAGAS record."""
    shape = record_shape(data)
    case_id = _case_id(data, fallback_id)
    if shape == RAGAS:
        question, reference = data.get("user_input"), data.get("reference")
        answer, contexts = data.get("response"), data.get("retrieved_contexts")
    elif shape == SEED003:
        question, reference = data.get("question"), data.get("reference_answer", data.get("ground_truth"))
        answer, contexts = data.get("answer"), data.get("contexts")
    else:
        raise ValueError("not a seed-003 or RAGAS-style record")
    case: dict[str, Any] = {"id": case_id, "question": question, "reference_answer": reference}
    for key in ("category", "difficulty", "tags", "vault", "answerable"):
        if key in data:
            case[key] = data[key]
    case["metadata"] = {"imported_from": shape}
    capture = {
        "case_id": case_id,
        "answer": answer if answer is not None else "",
        "retrieved": _chunks(contexts),
        "method": data.get("method") or shape,
    }
    return case, capture
