"""`raglake import` on CSV files: the one `ragas ... .to_pandas().to_csv()` writes (pandas' index column,
list columns as Python-repr strings, the metric columns ragas adds) and a generic one; a bad cell names
its file, line and column."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from raglake.cli import app
from raglake.errors import InputError
from raglake.golden import load_golden, load_imported_captures

CONTEXTS = [
    ["Ann wrote it in 1999.", "It was 'revised', later, in 2004."],
    ['The bridge is 2.1 km long; "the longest" in the region.', "Line one\nline two"],
    [],
]


def _ragas_csv(path: Path) -> Path:
    """What ragas' EvaluationResult.to_pandas().to_csv(path) writes: pandas' default to_csv."""
    frame = pd.DataFrame(
        {
            "user_input": ["Who wrote it?", "How long is the bridge?", "What is unknowable?"],
            "retrieved_contexts": CONTEXTS,
            "response": ["Ann.", "2.1 km.", None],
            "reference": ["Ann wrote it.", "2.1 km", "Nobody knows."],
            "faithfulness": [1.0, 0.5, None],
            "answer_relevancy": [0.9, 0.8, 0.1],
        }
    )
    frame.to_csv(path)
    return path


def test_the_csv_ragas_writes_imports_as_is(tmp_path: Path) -> None:
    source = _ragas_csv(tmp_path / "ragas_eval.csv")
    assert source.read_text().startswith(",user_input,retrieved_contexts")  # the unnamed index column
    result = CliRunner().invoke(app, ["import", str(source), "--out-dir", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    cases = [json.loads(line) for line in (tmp_path / "out" / "ragas_eval.golden.jsonl").read_text().splitlines()]
    captures = [json.loads(line) for line in (tmp_path / "out" / "ragas_eval.captures.jsonl").read_text().splitlines()]
    assert [c["question"] for c in cases] == ["Who wrote it?", "How long is the bridge?", "What is unknowable?"]
    assert [c["reference_answer"] for c in cases] == ["Ann wrote it.", "2.1 km", "Nobody knows."]
    assert [[r["text"] for r in c.get("retrieved", [])] for c in captures] == CONTEXTS  # quotes, commas, newlines kept
    assert [c.get("answer", "") for c in captures] == ["Ann.", "2.1 km.", ""]
    assert [c["case_id"] for c in captures] == [c["id"] for c in cases]
    # ragas' own scores are kept with the case, not dropped
    assert cases[0]["metadata"]["faithfulness"] == 1.0 and cases[1]["metadata"]["answer_relevancy"] == 0.8
    assert "faithfulness" not in cases[2]["metadata"]  # pandas writes NaN as an empty cell: missing
    assert cases[0]["metadata"]["imported_from"] == "ragas"
    assert "evaluate with: raglake run --golden" in " ".join(result.output.split())


def test_a_generic_csv_imports_and_runs_as_a_golden_set(tmp_path: Path) -> None:
    source = tmp_path / "mine.csv"
    source.write_text(
        "id,question,answer,contexts,reference,category,tags,answerable\n"
        'q1,What is X?,X is Y.,"[""X is Y."", ""Unrelated.""]",X is Y.,factual,"[""a"", ""b""]",yes\n'
        "q2,Is there a Z?,I could not find this.,,,general,solo,false\n"
    )
    (q1, q2) = load_golden(source).cases
    assert (q1.id, q1.category, q1.tags, q1.answerable) == ("q1", "factual", ["a", "b"], True)
    assert (q2.tags, q2.answerable, q2.reference_answer) == (["solo"], False, None)
    captures = dict((c.case_id, c) for _, c in load_imported_captures(source))
    assert [r.text for r in captures["q1"].retrieved] == ["X is Y.", "Unrelated."]
    assert captures["q2"].retrieved == [] and captures["q2"].answer == "I could not find this."
    assert {c.method for c in captures.values()} == {"generic"}


def test_a_bad_list_cell_names_file_line_and_column(tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_text(
        'question,answer,contexts\n"A question\nover two lines",an answer,"[\'fine\']"\nQ2,A2,"[\'unclosed\'"\n'
    )
    with pytest.raises(InputError) as info:
        load_golden(source)
    assert (info.value.path, info.value.line, info.value.field) == (str(source), 4, "contexts")
    assert "not a list or object" in str(info.value)


def test_a_yes_no_column_refuses_other_words(tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_text("question,answer,answerable\nQ,A,maybe\n")
    with pytest.raises(InputError, match="expected true or false, got 'maybe'") as info:
        load_golden(source)
    assert info.value.line == 2 and info.value.field == "answerable"


@pytest.mark.parametrize("holds", ["questions", "contexts"])
def test_an_export_without_answers_imports_as_a_golden_set_alone(tmp_path: Path, holds: str) -> None:
    """A testset of questions (what ragas' generator writes), or contexts without answers, wrote a captures file of
    empty answers and printed a `replay:` line that scored them as such; now only the golden set is written, and
    the output says why and how to evaluate it with a system that answers."""
    source = tmp_path / "testset.csv"
    frame = pd.DataFrame({"user_input": ["Who wrote it?", "How long is the bridge?"], "reference": ["Ann.", "2.1 km"]})
    if holds == "contexts":
        frame["retrieved_contexts"] = [json.dumps(c) for c in CONTEXTS[:2]]
    frame.to_csv(source, index=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["import", str(source), "--out-dir", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert sorted(p.name for p in out.iterdir()) == ["testset.golden.jsonl"]
    assert len(load_golden(out / "testset.golden.jsonl").cases) == 2
    assert "holds no answers" in said and "--target" in said and "replay:" not in said
    assert ("retrieved contexts are not imported" in said) == (holds == "contexts")
