"""Golden sets: the three file formats, the importers, and an error naming file, line and field
for every class of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglake.errors import InputError
from raglake.golden import load_golden, load_imported_captures, load_labels
from raglake.lake.query import fetch
from raglake.pipeline.lakes import open_lake
from tests.conftest import FIXTURES
from tests.lakekit import land

CASES = [
    {
        "id": "a",
        "question": "Which database?",
        "category": "factual",
        "tags": ["db"],
        "gold_supports": [{"rel_path": "./work\\atlas.md", "heading_path": "Atlas >  Database ", "date": "2025-01-02"}],
    },
    {
        "id": "b",
        "question": "When is the launch?",
        "category": "recency/conflict",
        "difficulty": "Hard",
        "recency_conflict_rule": "cite_newer",
        "answerable": True,
        "gold_supports": [
            {"rel_path": "a.md", "heading_path": "A", "date": "2025-01-01"},
            {"rel_path": "b.md", "heading_path": ["B", "Launch"], "date": "2025-04-01"},
        ],
    },
]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _yaml(cases: list[dict]) -> str:
    import yaml

    return yaml.safe_dump(cases, sort_keys=False)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".yaml"])
def test_the_three_formats_load_the_same_cases(tmp_path: Path, suffix: str) -> None:
    text = {
        ".jsonl": "\n".join(json.dumps(c) for c in CASES),
        ".json": json.dumps(CASES, indent=2),
        ".yaml": _yaml(CASES),
    }[suffix]
    golden = load_golden(_write(tmp_path / f"g{suffix}", text))
    assert [c.id for c in golden.cases] == ["a", "b"]
    a, b = golden.cases
    assert a.gold_supports[0].rel_path == "work/atlas.md"
    assert a.gold_supports[0].heading_path == ("Atlas", "Database")
    assert b.category == "recency_conflict" and b.difficulty == "hard"
    assert b.gold_supports[1].heading_path == ("B", "Launch")
    assert a.expected_action == "answer"
    reference = load_golden(_write(tmp_path / "ref.jsonl", "\n".join(json.dumps(c) for c in CASES)))
    assert golden.content_hash == reference.content_hash  # the hash is of content, not of the file format


def test_json_object_with_cases_key_and_unanswerable_default_action(tmp_path: Path) -> None:
    path = _write(tmp_path / "g.json", json.dumps({"cases": [{"id": 1, "question": "q", "answerable": False}]}))
    (case,) = load_golden(path).cases
    assert case.id == "1" and case.expected_action == "refuse"


BAD = [
    ("invalid_json.jsonl", '{"id": "a", "question": "q"}\n{"id": "b", "question": \n', 2, None, "invalid JSON"),
    ("missing_id.jsonl", '{"id": "a", "question": "q"}\n\n{"question": "x"}\n', 3, "id", "required field is missing"),
    ("missing_question.jsonl", '{"id": "a"}\n', 1, "question", "required field is missing"),
    (
        "duplicate.jsonl",
        '{"id": "a", "question": "q"}\n{"id": "a", "question": "r"}\n',
        2,
        "id",
        "duplicate id 'a' (first used at line 1)",
    ),
    ("wrong_type.jsonl", '{"id": "a", "question": "q", "tags": "db"}\n', 1, "tags", "valid list"),
    ("wrong_bool.jsonl", '{"id": "a", "question": "q", "answerable": "maybe"}\n', 1, "answerable", "valid boolean"),
    (
        "category.jsonl",
        '{"id": "a", "question": "q", "category": "mutli-hop"}\n',
        1,
        "category",
        "did you mean 'multi_hop'?",
    ),
    (
        "unknown_field.jsonl",
        '{"id": "a", "question": "q", "gold_support": []}\n',
        1,
        "gold_support",
        "did you mean 'gold_supports'?",
    ),
    (
        "nested.json",
        '[\n {"id": "a", "question": "q"},\n {"id": "b", "question": "r",\n  "gold_supports": [{"rel_path": "x.md", "requred": true}]}\n]\n',  # noqa: E501
        3,
        "gold_supports[0].requred",
        "did you mean 'required'?",
    ),
    (
        "groups.jsonl",
        '{"id": "a", "question": "q", "gold_supports": [{"rel_path": "x.md"}], "required_support_groups": [[0, 2]]}\n',
        1,
        None,
        "names support index 2",
    ),
    (
        "yaml_field.yaml",
        "- id: a\n  question: q\n- id: b\n  question: r\n  difficulty: hardd\n",
        5,
        "difficulty",
        "did you mean 'hard'?",
    ),
    ("yaml_syntax.yaml", "- id: a\n  question: [q\n", 3, None, "invalid YAML"),
    ("not_object.jsonl", '["a", "b"]\n', 1, None, "expected an object"),
]


@pytest.mark.parametrize(("name", "text", "line", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_bad_golden_file_names_file_line_and_field(
    tmp_path: Path, name: str, text: str, line: int, field: str | None, words: str
) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(InputError) as info:
        load_golden(path)
    err = info.value
    assert err.path == str(path)
    assert err.line == line
    assert err.field == field
    assert words in str(err)
    assert str(err).startswith(f"{path}:{line}:")


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no cases"):
        load_golden(_write(tmp_path / "empty.jsonl", "\n\n"))
    with pytest.raises(InputError, match="file not found"):
        load_golden(tmp_path / "nope.jsonl")


def test_seed003_list_imports_cases_and_captures(tmp_path: Path) -> None:
    records = [
        {
            "question": "What is X?",
            "reference_answer": "X is Y.",
            "answer": "X is Y [1].",
            "contexts": ["X is Y.", "Unrelated."],
        }
    ]
    path = _write(tmp_path / "sample_eval.json", json.dumps(records))
    (case,) = load_golden(path).cases
    assert case.id == "sample_eval-0001" and case.reference_answer == "X is Y."
    ((_, capture),) = load_imported_captures(path)
    assert capture.case_id == case.id and capture.answer == "X is Y [1]."
    assert [c.text for c in capture.retrieved] == ["X is Y.", "Unrelated."]
    assert [c.rank for c in capture.retrieved] == [1, 2]


def test_ragas_records_import(tmp_path: Path) -> None:
    rows = [
        {
            "user_input": "Who wrote it?",
            "retrieved_contexts": ["Ann wrote it."],
            "response": "Ann.",
            "reference": "Ann wrote it.",
        },
        {"user_input": "When?", "retrieved_contexts": "bad", "response": "", "reference": "Today."},
    ]
    path = _write(tmp_path / "ragas.jsonl", "\n".join(json.dumps(r) for r in rows))
    golden = load_golden(path)
    assert [c.question for c in golden.cases] == ["Who wrote it?", "When?"]
    captures = load_imported_captures(path)
    assert captures[0][1].answer == "Ann." and captures[0][1].method == "ragas"
    assert captures[1][1].retrieved[0].text == "bad"  # a single string is one context
    assert captures[1][1].status == "empty"


def test_ragas_bad_contexts_type_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "ragas.jsonl", json.dumps({"user_input": "q", "retrieved_contexts": 3}) + "\n")
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert info.value.line == 1 and info.value.field == "contexts"


def test_label_file_merges_and_rejects_unknown_cases(tmp_path: Path) -> None:
    golden = load_golden(FIXTURES / "mini_golden.jsonl")
    line = {
        "case_id": "c1",
        "chunks": [{"rel_path": "work/atlas.md", "heading_path": "Atlas", "topically_relevant": 1}],
    }
    merged = load_labels(_write(tmp_path / "labels.jsonl", json.dumps(line)), golden)
    assert merged.by_id()["c1"].labels.chunks[0].topically_relevant == 1
    assert merged.content_hash != golden.content_hash
    with pytest.raises(InputError) as info:
        load_labels(_write(tmp_path / "bad.jsonl", json.dumps({**line, "case_id": "c1x"})), golden)
    assert info.value.field == "case_id" and "did you mean 'c1'" in str(info.value)
    with pytest.raises(InputError) as info:
        load_labels(_write(tmp_path / "bad2.jsonl", json.dumps({"case_id": "c1", "answers": [{"helpful": 2}]})), golden)
    assert info.value.field == "answers[0].helpful"


def test_a_repeated_tag_counts_the_case_once(tmp_path: Path) -> None:
    """Issue 10 (1c): `tags: [x, x]` put the case twice into slice x of breakdown and compare."""
    rows = [json.loads(line) for line in (FIXTURES / "mini_golden.jsonl").read_text().splitlines() if line.strip()]
    rows[0]["tags"] = ["atlas", "db", "atlas", "db"]
    path = _write(tmp_path / "g.jsonl", "\n".join(json.dumps(r) for r in rows))
    lake = str(tmp_path / "lake")
    land(lake, str(path), f"replay:{FIXTURES / 'mini_captures.jsonl'}", "r-tags")
    queries = open_lake(lake)
    pairs = fetch(queries.con, "SELECT case_id, slice FROM case_slices WHERE run_id = 'r-tags' AND dimension = 'tag'")
    assert len(pairs) == len(set(pairs)) == sum(len(set(r.get("tags") or ["-"])) for r in rows)
    db = [r for r in queries.breakdown(["r-tags"], "tag") if r["slice"] == "db" and r["metric"] == "recall_any_at_k"]
    assert [r["n"] for r in db] == [1]  # only c1 is tagged db
    assert load_golden(path).by_id()["c1"].tags == ["atlas", "db"]  # first-seen order


def test_imported_records_keep_strict_types(tmp_path: Path) -> None:
    """Issue 10 (7): an imported id or context is not stringified whatever its type."""
    rows = [
        {"question": "q", "answer": "a", "contexts": ["fine"]},
        {"id": ["x"], "question": "q", "answer": "a", "contexts": ["fine"]},
    ]
    with pytest.raises(InputError) as info:
        load_golden(_write(tmp_path / "ids.jsonl", "\n".join(json.dumps(r) for r in rows)))
    assert (info.value.line, info.value.field) == (2, "id")
    path = _write(
        tmp_path / "ctx.jsonl", json.dumps({"question": "q", "answer": "a", "contexts": ["fine", {"text": "x"}]})
    )
    with pytest.raises(InputError) as info:
        load_golden(path)
    assert (info.value.line, info.value.field) == (1, "contexts") and "contexts[1]" in info.value.message
