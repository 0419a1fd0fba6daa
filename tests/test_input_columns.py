"""Columns of a DataFrame (or of a generic / RAGAS file) are never ignored silently: a column close to one
raglake reads is an error with "did you mean" unless it is kept on purpose (`extra_columns=`, or a name
starting `meta_`); a missing required column is one error naming the column; rows that hold contexts but
no answers, with no target to answer them, say how to give either. Nothing here starts Prefect."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import raglake
from raglake.api.inputs import inputs_for
from raglake.config.front import resolve
from raglake.errors import ConfigError, InputError, LakeError
from raglake.golden import load_golden, load_imported_captures
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import DEFAULT_TARGET, SAMPLE_GOLDEN, sample_path

QUESTIONS = ["Who wrote it?", "How long is the bridge?"]
SAMPLE_CORPUS = Path(sample_path("corpus")).resolve()
CONTEXTS = [["Ann wrote it in 1999."], ["The bridge is 2.1 km long."]]
ANSWERS = ["Ann.", "2.1 km."]


def _frame(**columns) -> pd.DataFrame:
    return pd.DataFrame({"question": QUESTIONS, **columns})


def test_a_column_close_to_a_known_one_is_an_error_with_did_you_mean(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    df = _frame(retrieved_context=CONTEXTS, answer=ANSWERS)
    with pytest.raises(InputError) as bad:
        raglake.evaluate(df, lake=lake)
    message = str(bad.value)
    assert "'retrieved_context'" in message and "did you mean 'retrieved_contexts'?" in message
    assert "extra_columns=" in message and "meta_" in message  # how to keep it on purpose
    assert "row " not in message  # a column, not a row
    # the same for a dict of columns and a list of rows, and for a capitalised name
    with pytest.raises(InputError, match="did you mean 'retrieved_contexts'"):
        raglake.evaluate({"question": QUESTIONS, "retrieved_context": CONTEXTS, "answer": ANSWERS}, lake=lake)
    with pytest.raises(InputError, match="did you mean 'answer'"):
        raglake.evaluate([{"question": q, "Answer": a} for q, a in zip(QUESTIONS, ANSWERS)], lake=lake)
    assert not lake.exists()


def test_a_column_kept_on_purpose_lands_in_the_metadata() -> None:
    df = _frame(retrieved_context=["x", "y"], meta_contxts=[1, 2], contexts=CONTEXTS, answer=ANSWERS)
    inputs = inputs_for(df, None, "kept", extra_columns=["retrieved_context"])
    try:
        cases = [json.loads(line) for line in Path(inputs.golden).read_text().splitlines()]
    finally:
        inputs.close()
    assert cases[0]["metadata"]["retrieved_context"] == "x" and cases[1]["metadata"]["meta_contxts"] == 2
    # evaluate takes the argument (it gets as far as the next check: the data's answers and a target)
    with pytest.raises(ConfigError, match="holds the answers already"):
        raglake.evaluate(df.drop(columns=["meta_contxts"]), extra_columns=["retrieved_context"], target="builtin:x")


def test_columns_far_from_any_known_one_and_ragas_columns_are_accepted() -> None:
    df = pd.DataFrame(
        {
            "user_input": QUESTIONS,
            "retrieved_contexts": CONTEXTS,
            "reference_contexts": CONTEXTS,
            "retrieved_context_ids": [["a"], ["b"]],
            "response": ANSWERS,
            "reference": ["Ann wrote it.", "2.1 km"],
            "faithfulness": [1.0, 0.5],
            "context_recall": [1.0, 1.0],
            "answer_relevancy": [0.9, 0.8],
            "source": ["wiki", "wiki"],
        }
    )
    inputs = inputs_for(df, None, "ragas")
    try:
        case = json.loads(Path(inputs.golden).read_text().splitlines()[0])
    finally:
        inputs.close()
    assert case["question"] == QUESTIONS[0] and case["metadata"]["context_recall"] == 1.0
    assert inputs.target is not None


def test_a_missing_question_column_is_one_error_naming_the_column() -> None:
    with pytest.raises(InputError) as bad:
        raglake.evaluate(pd.DataFrame({"answer": ANSWERS, "contexts": CONTEXTS}))
    message = str(bad.value)
    assert "'question'" in message and "user_input" in message and "row" not in message
    assert "got None" not in message


def test_contexts_without_answers_and_no_target_say_how_to_give_either(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    with pytest.raises(ConfigError) as bad:
        raglake.evaluate(_frame(contexts=CONTEXTS), lake=lake)
    message = str(bad.value)
    assert "no answer" in message and "'answer'" in message and "'response'" in message and "target=" in message
    assert not lake.exists()


def test_files_of_another_tools_shape_refuse_a_near_miss_column_by_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "ragas.jsonl"
    rows = [
        {"user_input": "Who wrote it?", "retrieved_contexts": ["Ann."], "response": "Ann."},
        {"user_input": "How long?", "retrieved_context": ["2.1 km"], "response": "2.1 km."},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError) as bad:
        load_golden(path)
    assert bad.value.line == 2 and bad.value.field == "retrieved_context"
    assert "did you mean 'retrieved_contexts'?" in str(bad.value)
    with pytest.raises(InputError, match="did you mean 'retrieved_contexts'"):
        load_imported_captures(path)
    csv = tmp_path / "generic.csv"
    csv.write_text('question,contexts,answer,meta_contxt,anwser\nWho?,"[""Ann.""]",Ann.,1,x\n')
    with pytest.raises(InputError) as bad:
        load_golden(csv)
    assert bad.value.field == "anwser" and "did you mean 'answer'?" in str(bad.value)


def _export(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_golden_file_holding_answers_is_its_own_replay_target_when_no_target_is_given(tmp_path: Path) -> None:
    """`--golden ragas.jsonl` (or golden= / the eval file's golden:) with no target evaluates the answers the
    file holds; before, the builtin RAG answered its questions and the file's answers were dropped silently."""
    path = _export(
        tmp_path / "ragas.jsonl",
        [
            {"user_input": q, "retrieved_contexts": c, "response": a, "reference": a}
            for q, c, a in zip(QUESTIONS, CONTEXTS, ANSWERS)
        ],
    )
    (run,) = resolve(None, {"golden": str(path)}, discover=False).runs
    assert run.target == f"replay:{path}"
    (run,) = resolve({"golden": "ragas.jsonl"}, folder=tmp_path).runs  # an eval file's golden:, relative to it
    assert run.target == f"replay:{path}"
    evaluation = resolve(None, {"golden": str(path), "targets": [DEFAULT_TARGET]}, discover=False)
    assert [r.target for r in evaluation.runs] == [DEFAULT_TARGET]  # a target the user names answers the questions
    (note,) = evaluation.notes  # and the file's answers not being evaluated is said, with how to evaluate them
    assert str(path) in note and "not evaluated" in note and f"replay:{path}" in note
    same_file = ["builtin", f"replay:{path}"]  # the file's answers beside a system's: nothing left out
    assert resolve(None, {"golden": str(path), "targets": same_file}, discover=False).notes == []
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.warns(UserWarning, match="not evaluated"), pytest.raises(LakeError):  # said before the plan's checks
        raglake.evaluate(golden=path, target=DEFAULT_TARGET, lake=blocker)
    result = raglake.evaluate(golden=path, lake=tmp_path / "lake", metrics=["semantic_similarity"])
    values = result.to_pandas().set_index("case_id")["value"]
    assert len(values) == 2 and values.min() > 0.999  # each answer is its own reference: the file's answers scored


def test_a_relative_spelling_of_the_golden_file_as_a_target_is_the_same_file(tmp_path: Path, monkeypatch) -> None:
    path = _export(tmp_path / "ragas.jsonl", [{"question": QUESTIONS[0], "answer": ANSWERS[0]}])
    monkeypatch.chdir(tmp_path)
    assert resolve(None, {"golden": str(path), "targets": ["builtin", "replay:./ragas.jsonl"]}).notes == []
    assert len(resolve(None, {"golden": "ragas.jsonl", "targets": ["builtin"]}).notes) == 1


def test_a_golden_file_of_questions_alone_keeps_the_default_target(tmp_path: Path) -> None:
    testset = _export(
        tmp_path / "testset.jsonl", [{"user_input": q, "reference": a} for q, a in zip(QUESTIONS, ANSWERS)]
    )
    (run,) = resolve(None, {"golden": str(testset)}, discover=False).runs
    assert run.target == DEFAULT_TARGET
    (run,) = resolve(None, {"golden": SAMPLE_GOLDEN}, discover=False).runs
    assert run.target == DEFAULT_TARGET
    # handed as the data, an export of questions alone needs a target, as rows without answers do (before: the
    # error said it held contexts, which it does not)
    with pytest.raises(ConfigError) as bad:
        raglake.evaluate(testset, lake=tmp_path / "lake")
    assert "hold no answers" in str(bad.value) and "target=" in str(bad.value) and "contexts" not in str(bad.value)
    assert not (tmp_path / "lake").exists()


def test_a_golden_file_holding_contexts_but_no_answers_and_no_target_says_how_to_give_either(tmp_path: Path) -> None:
    path = _export(tmp_path / "contexts.jsonl", [{"question": q, "contexts": c} for q, c in zip(QUESTIONS, CONTEXTS)])
    with pytest.raises(ConfigError) as bad:
        resolve(None, {"golden": str(path)}, discover=False)
    message = str(bad.value)
    assert str(path) in message and "no answer" in message and "--target" in message and "target=" in message
    evaluation = resolve(None, {"golden": str(path), "targets": ["builtin"]}, discover=False)
    assert [r.target for r in evaluation.runs] == ["builtin"]
    (note,) = evaluation.notes  # the contexts the named target does not use are said
    assert str(path) in note and "retrieved contexts" in note and "not evaluated" in note


def test_a_golden_set_of_ones_own_with_no_target_says_who_answers_it(tmp_path: Path) -> None:
    """The default target is the builtin RAG over the bundled sample corpus: said for a golden set of the user's own
    (its questions are not about that corpus), not for the bundled sample."""
    own = tmp_path / "mine.jsonl"
    own.write_text(json.dumps({"id": "q1", "question": QUESTIONS[0]}) + "\n")
    testset = _export(tmp_path / "testset.jsonl", [{"user_input": QUESTIONS[0], "reference": ANSWERS[0]}])
    for golden in (own, testset):
        evaluation = resolve(None, {"golden": str(golden)}, discover=False)
        (note,) = evaluation.notes
        assert "no target named" in note and str(golden) in note and "--target" in note
        assert resolve(None, {"golden": str(golden), "targets": ["builtin"]}, discover=False).notes == []
    assert resolve(None, {"golden": SAMPLE_GOLDEN}, discover=False).notes == []
    assert resolve(None, {}, discover=False).notes == []


def test_config_check_says_the_notes_too(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from raglake.cli import app

    _export(tmp_path / "ragas.jsonl", [{"user_input": QUESTIONS[0], "response": ANSWERS[0]}])
    (tmp_path / "raglake.yaml").write_text(f"golden: ragas.jsonl\ntargets: ['builtin:{SAMPLE_CORPUS}']\n")
    done = CliRunner().invoke(app, ["config", "check", "-c", str(tmp_path / "raglake.yaml")])
    assert done.exit_code == 0, done.output
    assert "note: " in done.output and "holds answers of its own" in " ".join(done.output.split())


def test_a_json_export_under_a_cases_key_is_read_as_its_own_replay_file_too(tmp_path: Path) -> None:
    """`{"cases": [...]}` is read as a golden set; as a replay file it was refused ("an object with a 'captures'
    list"), so the run a file of answers now defaults to could not start."""
    rows = [{"question": q, "answer": a, "contexts": c} for q, a, c in zip(QUESTIONS, ANSWERS, CONTEXTS)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"cases": rows}, indent=1))
    (run,) = resolve(None, {"golden": str(path), "metrics": ["mrr_at_k"]}, discover=False).runs
    plan = plan_run(run)
    assert run.target == f"replay:{path}"
    assert [c.answer for c in plan.target.capture(list(plan.golden.cases))] == ANSWERS


def test_the_command_lines_note_shows_the_path_as_written(tmp_path: Path) -> None:
    """A path with brackets was read as rich markup: `runs/[v2]/x.jsonl` printed as `runs//x.jsonl`."""
    from typer.testing import CliRunner

    from raglake.cli import app

    folder = tmp_path / "[v2]"
    folder.mkdir()
    path = _export(folder / "x.jsonl", [{"question": QUESTIONS[0], "answer": ANSWERS[0]}])
    done = CliRunner().invoke(app, ["run", "--golden", str(path), "--target", "replay:missing.jsonl"])
    assert done.exit_code != 0  # the named target's file is missing: the note comes before that error
    assert f"note: {path} holds answers of its own" in " ".join(done.output.split())


def test_a_replay_file_of_another_tools_shape_without_any_answer_is_refused_not_replayed_empty(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """`--target replay:FILE` on an export with no answer column (contexts alone, or questions alone) landed every
    case `empty`, the answer metrics scoring answers nobody gave; it is refused, naming the file and how to give
    either. An explicit empty answer is still taken as one (retrieval alone, on purpose)."""
    import sys

    from raglake.cli import main

    golden = tmp_path / "golden.jsonl"
    golden.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    contexts = _export(tmp_path / "contexts.jsonl", [{"id": f"q{i}", "contexts": c} for i, c in enumerate(CONTEXTS)])
    questions = _export(tmp_path / "testset.jsonl", [{"id": f"q{i}", "user_input": q} for i, q in enumerate(QUESTIONS)])
    for path in (contexts, questions):
        (run,) = resolve(None, {"golden": str(golden), "targets": [f"replay:{path}"]}, discover=False).runs
        with pytest.raises(InputError) as bad:
            plan_run(run)
        message = str(bad.value)
        assert str(path) in message and "no answer" in message and "'response'" in message
        lake = tmp_path / "lake"
        args = ["run", "--golden", str(golden), "--target", f"replay:{path}", "--lake", str(lake)]
        monkeypatch.setattr(sys, "argv", ["raglake", *args])
        with pytest.raises(SystemExit) as exited:
            main()
        said = " ".join(capsys.readouterr().out.split())
        assert exited.value.code == 2 and said.startswith(f"error: {path}: field 'answer': holds no answer"), said
        assert not lake.exists()  # refused before anything landed
    empty = _export(
        tmp_path / "empty.jsonl", [{"id": f"q{i}", "contexts": c, "response": ""} for i, c in enumerate(CONTEXTS)]
    )
    (run,) = resolve(None, {"golden": str(golden), "targets": [f"replay:{empty}"]}, discover=False).runs
    plan = plan_run(run)
    assert [c.answer for c in plan.target.capture(list(plan.golden.cases))] == ["", ""]
