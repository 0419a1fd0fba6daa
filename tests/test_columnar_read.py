"""Reading golden sets and captures in bulk (raglake.columnar): the same values as the record models
give, the bulk path taken for ordinary files, and for a bad file the per-record path's error (file,
line, field) word for word. The vectorised normalisations and rules agree with their Python originals."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from raglake.anchors import heading_segments, heading_string, normalise_rel_path
from raglake.columnar import normalise as norm
from raglake.columnar.captures import captures_from_models, read_capture_columns
from raglake.columnar.golden import golden_from_models, read_golden_columns
from raglake.columnar.lines import _newlines, read_lines
from raglake.columnar.schema import GOLDEN_FREE_FORM, capture_schema, golden_schema, heading_type
from raglake.errors import InputError
from raglake.metrics import rules
from raglake.records import read_records, validate_record
from raglake.schemas import Capture, GoldenCase

# ---- the read schemas and the vectorised normalisations -------------------------------------------------


def test_py_space_is_every_character_python_strips() -> None:
    for c in range(0x110000):
        ch = chr(c)
        assert (ch in norm.PY_SPACE) == ch.isspace() == bool(re.fullmatch(r"\s", ch)), hex(c)


def _inner(annotation: typing.Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in typing.get_args(annotation) if (m := _inner(a)) is not None), None)


def _same_fields(arrow: pa.DataType | pa.Schema, model: type[BaseModel], path: str) -> None:
    fields = list(arrow) if isinstance(arrow, pa.Schema) else [arrow.field(i) for i in range(arrow.num_fields)]
    names = [f.name for f in fields]
    expected = [n for n in model.model_fields if not (model is GoldenCase and n in GOLDEN_FREE_FORM)]
    assert names == expected, path
    for f in fields:
        inner = _inner(model.model_fields[f.name].annotation)
        t = f.type
        while pa.types.is_list(t):
            t = t.value_type
        if inner is not None:
            _same_fields(t, inner, f"{path}.{f.name}")


@pytest.mark.parametrize("form", ["list", "string"])
def test_read_schemas_follow_the_models_field_for_field(form: str) -> None:
    _same_fields(golden_schema(heading_type(form)), GoldenCase, "golden")
    _same_fields(capture_schema(heading_type(form)), Capture, "capture")


def _models_under(model: type[BaseModel]) -> set[type[BaseModel]]:
    found = {model}
    for f in model.model_fields.values():
        if (inner := _inner(f.annotation)) is not None:
            found |= _models_under(inner)
    return found


def test_record_models_build_their_mutable_defaults_with_a_factory() -> None:
    """pydantic deep-copies an unhashable default (`= []`, `= {}`, `= Latency()`) on every validation: five
    copies a golden case, 20-50% of its validation. A default_factory builds it instead."""
    for model in _models_under(GoldenCase) | _models_under(Capture):
        for name, f in model.model_fields.items():
            if f.default_factory is None:
                assert isinstance(f.default, typing.Hashable), f"{model.__name__}.{name}: default {f.default!r}"


TEXT = st.text(alphabet="ab >/#.\\\t\u00a0\u2003\x1c\u00e9\u0301", max_size=12)


@settings(max_examples=400, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6), st.lists(st.lists(TEXT, max_size=3), min_size=1, max_size=6))
def test_headings_normalise_as_the_model_does(strings: list[str], lists: list[list[str]]) -> None:
    """A heading written as a string or as a list of segments: the model's normal form, as a string."""
    assert norm.headings(pa.array(strings)).to_pylist() == [heading_string(heading_segments(v)) for v in strings]
    ours = norm.headings(pa.array(lists, pa.list_(pa.string())))
    assert ours.to_pylist() == [heading_string(heading_segments(v)) for v in lists]


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=6))
def test_rel_paths_and_blanks_as_the_model_sees_them(values: list[str]) -> None:
    assert norm.rel_paths(pa.array(values)).to_pylist() == [normalise_rel_path(v) for v in values]
    assert norm.blank(pa.array(values)).tolist() == [not v.strip() for v in values]


ANSWER = st.lists(
    st.sampled_from(
        list("ab IDONTKNWdonktw'[]1.:/?")
        + ["\u2019", "\u0130", "\u212a", ".md", ".MD", "[[x]]", "mean", "which ", " don't know", "unknown", "n/a"]
        + ["Do you mean", "notes/x.md", "[Source 2]", "\u00a0", "\x1c", "Cannot determine", "pdf", "\u0131", "\u017f"]
        + ["\u03a3", "\u00e9", "DON\u2019T KNOW", "N/A", ".M", "\u212ad", "spec", "ify", "ſpecify", "İ don't know"]
    ),
    max_size=8,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(ANSWER, st.sampled_from([None, True, False]), st.integers(0, 1)), min_size=1, max_size=8))
def test_vectorised_rules_agree_with_the_rules(rows: list) -> None:
    answers = pa.array([a for a, _, _ in rows])
    explicit = pa.array([x for _, x, _ in rows], pa.bool_())
    n_refs = np.array([r for _, _, r in rows])
    captures = [Capture(case_id="c", answer=a, abstained=x) for a, x, _ in rows]
    did, given_field = rules.abstained_array(explicit, answers)
    assert list(zip(did.tolist(), given_field.tolist())) == [
        (rules.abstained(c)[0], rules.abstained(c)[1] == "abstained_field") for c in captures
    ]
    assert rules.dont_know_array(answers).tolist() == [rules.is_dont_know(a) for a, _, _ in rows]
    assert rules.cited_array(answers, n_refs).tolist() == [bool(r) or rules.has_citation(a, ()) for a, _, r in rows]
    observed = rules.observed_action_array(did, answers, norm.blank(answers))
    assert observed.tolist() == [rules.observed_action(c) for c in captures]
    maybe = rules.maybe_cites_in_text(answers)
    for (a, _, _), m in zip(rows, maybe.tolist()):
        if not m:
            assert rules.cited_sources(a, ()) == (set(), set())


# ---- files: ordinary ones in bulk, bad ones explained by the per-record path --------------------------------

CASE = '{"id": "c1", "question": "Q?", "gold_supports": [{"rel_path": "a.md", "heading_path": "A > B"}]}'
CAPTURE = (
    '{"case_id": "c1", "answer": "x", "retrieved": [{"rank": 2, "rel_path": "a.md", "heading_path": "A"}, '
    '{"rank": 1, "rel_path": "./b.md", "text": "t"}]}'
)


def _file(tmp_path: Path, lines: list[str], name: str = "f.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _assert_columns_equal(ours, theirs) -> None:
    for name in ("cases", "captures"):
        if hasattr(ours, name):
            assert getattr(ours, name).equals(getattr(theirs, name)), name
    for name in ("supports", "groups", "chunk_labels", "answer_labels", "chunks", "references"):
        if hasattr(ours, name):
            a, b = getattr(ours, name), getattr(theirs, name)
            assert a.parent.tolist() == b.parent.tolist() and a.index.tolist() == b.index.tolist(), name
            assert a.table.to_pylist() == b.table.to_pylist(), name


def _models(path: Path, model: type[BaseModel]) -> list:
    return [validate_record(r, model, path) for r in read_records(path)]


@pytest.mark.parametrize(
    "lines",
    [
        [CASE],
        [CASE.replace('"A > B"', '["A", "B"]'), "", "// a comment", CASE.replace("c1", "c2").replace('"A > B"', "[]")],
        [
            '{"id": "c1", "question": "Q", "category": "Multi-Hop", "answerable": false, "tags": ["x"], '
            '"metadata": {"a": [1]}}'
        ],
        [
            '{"id": "c1", "question": "Q", "recency_conflict_rule": "cite newer", "gold_supports": [{"rel_path": '
            '" .\\\\a.md ", "heading_path": " A  >B ", "date": "2024-01-02", "snippets": ["s"]}], '
            '"required_support_groups": [[0]]}'
        ],
        [
            '{"id": "c1", "question": "Q", "labels": {"chunks": [{"rel_path": "a.md", "topically_relevant": 1}], '
            '"answers": [{"method": "m", "answer_sha256": "abcdef12", "helpful": 0}]}}'
        ],
    ],
)
def test_ordinary_golden_files_are_read_in_bulk_as_the_models_read_them(lines: list[str], tmp_path: Path) -> None:
    path = _file(tmp_path, lines)
    ours = read_golden_columns(path)
    assert ours.models is None, "read in bulk"
    _assert_columns_equal(ours, golden_from_models(str(path), _models(path, GoldenCase)))


@pytest.mark.parametrize(
    "lines, bulk",
    [
        ([CASE.replace("c1", "7").replace('"7"', "7")], False),  # an int id: the model makes it text
        (['{"id": "c1", "question": "Q", "tags": ["x", "x"]}'], False),  # the model drops the repeated tag
        (
            [
                '{"id": "c1", "question": "Q", "metadata": {"a": 1}}',
                '{"id": "c2", "question": "Q", "metadata": {"a": "s"}}',
            ],
            False,
        ),
        (["\ufeff" + CASE], True),
        ([CASE, CASE.replace("c1", "c2").replace('"A > B"', '["A"]')], False),  # string and list headings mixed
    ],
)
def test_unusual_valid_golden_files_still_read_as_the_models(lines: list[str], bulk: bool, tmp_path: Path) -> None:
    path = _file(tmp_path, lines)
    ours = read_golden_columns(path)
    assert (ours.models is None) == bulk
    _assert_columns_equal(ours, golden_from_models(str(path), _models(path, GoldenCase)))


@pytest.mark.parametrize(
    "data",
    [
        b'{"a": 1}\n{"b": "Caf\xc3\xa9 \xe2\x80\x94"}\n',
        b'{"a": 1}\n{"b": 2}',  # no newline at the end
        b'{"a": 1}\n\n\n{"b": 2}',  # empty lines, no newline at the end
        b'\xef\xbb\xbf{"a": 1}\r\n{"b": 2}\r\n',  # a BOM, CRLF (the \r stays in the record's line)
        b'// a comment\n  {"a": 1}\n \t\n{"b": 2}\n',  # a comment, a blank line, an indented record
        b"",
    ],
)
def test_the_record_lines_as_one_string_array_are_the_lines(data: bytes, tmp_path: Path) -> None:
    """Lines.strings (the cases table's `golden_case`) holds each record's line, built from the buffer."""
    (tmp_path / "f.jsonl").write_bytes(data)
    lines = read_lines(tmp_path / "f.jsonl")
    kept = [x for x in data.removeprefix(b"\xef\xbb\xbf").split(b"\n") if x.strip() and not x.strip().startswith(b"//")]
    expected = [x.decode() for x in kept]
    assert [lines.line(i).decode() for i in range(len(lines))] == expected
    assert lines.strings().to_pylist() == expected
    assert [r.line for r in read_records(tmp_path / "f.jsonl")] == lines.numbers.tolist()
    assert len(expected) == (0 if not data else 2)


@given(st.binary(max_size=300), st.integers(1, 64))
def test_newlines_are_found_block_by_block(data: bytes, block: int) -> None:
    assert _newlines(data, block).tolist() == [i for i, b in enumerate(data) if b == 10]


def test_ordinary_capture_files_are_read_in_bulk_as_the_models_read_them(tmp_path: Path) -> None:
    path = _file(tmp_path, [CAPTURE, CAPTURE.replace("c1", "c2").replace('"x"', '"  "')])
    ours = read_capture_columns(path)
    assert ours.models is None
    theirs = captures_from_models(str(path), _models(path, Capture))
    _assert_columns_equal(ours, theirs)
    assert ours.captures.column("status").to_pylist() == ["ok", "empty"]
    assert ours.chunks.table.column("rank").to_pylist() == [1, 2, 1, 2]


BAD_GOLDEN = [
    '{"id": "c1", "question": "Q", "colour": 1}',
    '{"id": "c1", "question": "Q", "gold_supports": [{"rel_path": "a", "heading": "x"}]}',
    '{"id": "c1", "question": "Q", "answerable": null}',
    '{"id": "c1", "question": "Q", "answerable": "yes"}',
    '{"id": "c1", "question": "Q", "category": "bogus"}',
    '{"id": "c1"}',
    '{"id": " ", "question": "Q"}',
    '{"id": "c1", "question": ""}',
    '{"id": "c1", "question": "Q", "gold_supports": [{"rel_path": "a"}], "required_support_groups": [[3]]}',
    '{"id": "c1", "question": "Q", "required_support_groups": [[]]}',
    '{"id": "c1", "question": "Q", "recency_conflict_rule": "cite_newer", "gold_supports": [{"rel_path": "a"}]}',
    '{"id": "c1", "id": "c2", "question": "Q"}',
    '{"id": "c1", "question": "Q",',
    '{"id": "c1", "question": "Q", "labels": {"chunks": [{"rel_path": "a", "topically_relevant": 2}]}}',
    '{"id": "c1", "question": "Q", "labels": {"answers": [{"answer_sha256": "XYZ"}]}}',
    '{"id": "c1", "question": "Q", "tags": null}',
    '{"id": "c1", "question": "Q", "gold_supports": [{"rel_path": "a", "date": "2024-02-30"}]}',
    '{"id": "c1", "question": "Q", "metadata": {"x": NaN}}',
    '{"id": "c1", "question": "Q", "gold_supports": [null]}',
]
BAD_CAPTURES = [
    '{"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a"}, {"rank": 1, "rel_path": "b"}]}',
    '{"case_id": "c1", "retrieved": [{"rank": 0, "rel_path": "a"}]}',
    '{"case_id": "c1", "status": "weird"}',
    '{"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a", "text": null}]}',
    '{"case_id": "c1", "latency_ms": {"total": -1}}',
    '{"case_id": "c1", "attempts": 0}',
    '{"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a", "colour": 1}]}',
    '{"case_id": "c1", "folder_mode": "sideways"}',
    '{"case_id": "c1", "retrieved": [{"rank": 1.5, "rel_path": "a"}]}',
    '{"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a", "score": "high"}]}',
    '{"case_id": "c1", "answer": "x"} {"case_id": "c2"}',
    '{"case_id": "c1", "retrieved": [{"rank": 1, "rel_path": "a", "score": NaN}]}',
    '{"case_id": "c1", "latency_ms": {"total": Infinity}}',
]


def _per_record_error(path: Path, model: type[BaseModel]) -> str:
    with pytest.raises(InputError) as e:
        _models(path, model)
    return str(e.value)


@pytest.mark.parametrize("bad", BAD_GOLDEN)
def test_a_bad_golden_file_raises_the_per_record_error(bad: str, tmp_path: Path) -> None:
    path = _file(tmp_path, [CASE.replace("c1", "c0"), bad])
    expected = _per_record_error(path, GoldenCase)
    assert ":2" in expected or "line 2" in expected, expected
    with pytest.raises(InputError) as e:
        read_golden_columns(path)
    assert str(e.value) == expected


@pytest.mark.parametrize("bad", BAD_CAPTURES)
def test_a_bad_capture_file_raises_the_per_record_error(bad: str, tmp_path: Path) -> None:
    path = _file(tmp_path, [CAPTURE.replace("c1", "c0"), bad])
    expected = _per_record_error(path, Capture)
    with pytest.raises(InputError) as e:
        read_capture_columns(path)
    assert str(e.value) == expected
