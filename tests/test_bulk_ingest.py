"""Golden sets and capture files validated in bulk (raglake.columnar.ingest, issue 29 item 2): the spool's
canonical lines, the source lines, the ids and the golden set's content hash are byte for byte what the
per-record path (a pydantic model per record) makes of the same file, and a bad file raises the per-record
path's error word for word. The reference below is that path, written out here apart from raglake's."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from raglake.columnar import ingest
from raglake.columnar import json_text as jt
from raglake.columnar.captures import read_capture_columns
from raglake.columnar.golden import read_golden_columns
from raglake.columnar.ingest import Canonical, capture_blocks, golden_blocks
from raglake.columnar.lines import nesting
from raglake.errors import InputError
from raglake.golden import iter_captures, load_golden, spool_captures
from raglake.records import validate_record
from raglake.schemas import Capture, GoldenCase
from raglake.spool import Spool, iter_records


@pytest.fixture(autouse=True)
def _every_file_in_bulk(monkeypatch) -> None:
    """The small files here are read in bulk (a file under ingest.BULK_MIN_BYTES is read record by record)."""
    monkeypatch.setattr(ingest, "BULK_MIN_BYTES", 0)


# ---- the reference: the per-record path ------------------------------------------------------------------


def _reference(path: Path, model: type[BaseModel], key: str) -> tuple[bytes, list[int], list[str], str]:
    """(spool bytes, source lines, ids, content hash) as one pydantic model per record makes them."""
    spool: Spool = Spool(model, key)
    h = hashlib.sha256()
    for record in iter_records(path):
        item = validate_record(record, model, path)
        first = spool.position(getattr(item, key))
        if first is not None:
            raise InputError(str(path), record.line, key, _duplicate(model, getattr(item, key), spool.line(first)))
        spool.append(item, record.line)
        h.update(json.dumps(item.model_dump(mode="json"), sort_keys=True, ensure_ascii=False).encode() + b"\n")
    if not spool:
        empty = "the golden set has no cases" if model is GoldenCase else "the capture file is empty"
        raise InputError(str(path), None, None, empty)
    return spool.raw(0, len(spool)), [spool.line(i) for i in range(len(spool))], list(spool.ids), h.hexdigest()[:16]


def _duplicate(model: type[BaseModel], key: str, first: int) -> str:
    if model is GoldenCase:
        return f"duplicate id {key!r} (first used at line {first})"
    return f"duplicate capture for case {key!r} (first at line {first})"


def _ours(path: Path, model: type[BaseModel]) -> tuple[bytes, list[int], list[str], str | None]:
    if model is GoldenCase:
        golden = load_golden(path)
        spool, digest = golden.cases, golden.content_hash
    else:
        spool, digest = spool_captures(path)[0], None
    return spool.raw(0, len(spool)), [spool.line(i) for i in range(len(spool))], list(spool.ids), digest


def _outcome(fn, *args):
    try:
        return fn(*args)
    except InputError as e:
        return f"InputError: {e}"


def _assert_same(path: Path, model: type[BaseModel], key: str) -> None:
    theirs, ours = _outcome(_reference, path, model, key), _outcome(_ours, path, model)
    if isinstance(theirs, tuple) and model is Capture:
        theirs = (*theirs[:3], None)  # a capture file's content key is its sha256, not a hash of dumps
    assert ours == theirs


def _write(path: Path, records: list, *, compact: bool, ascii_only: bool, extras: list[str] = ()) -> Path:
    separators = (",", ":") if compact else (", ", ": ")
    lines = [json.dumps(r, separators=separators, ensure_ascii=ascii_only) for r in records]
    for i, extra in enumerate(extras):
        lines.insert(min(len(lines), 1 + 2 * i), extra)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- generated files ---------------------------------------------------------------------------------------

CHARS = st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Z", "Cc", "Mn"))
TEXT = st.one_of(
    st.text(CHARS, max_size=12),
    st.text(alphabet='ab >/#."\\\t\n\x00\x1f\x7f\u2028é😀 ', max_size=10),
)
FLOAT = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(0, 1), st.integers(-(10**6), 10**6))
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
    | st.text(alphabet='[]{}"\\ ', max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


def _mostly(valid: st.SearchStrategy, invalid: st.SearchStrategy) -> st.SearchStrategy:
    """Valid values 29 times in 30: most generated files are read in bulk, some raise."""
    return st.integers(0, 29).flatmap(lambda i: invalid if i == 0 else valid)


NAME = st.text(CHARS, min_size=1, max_size=8).filter(str.strip)
# a file whose anchors mix both spellings of a heading path is read record by record (one in ten here)
HEADING = st.integers(0, 9).flatmap(
    lambda i: (
        st.lists(TEXT, max_size=3)
        if i == 0
        else st.one_of(st.none(), TEXT, st.sampled_from(["A > B", " a  >b>", "x/y#z"]))
    )
)
REL_PATH = _mostly(
    st.sampled_from(["a.md", "./notes/b.md", " .\\c.md ", "d/e f.md"]), st.one_of(TEXT, st.just("/abs.md"))
)
CHOICE = _mostly(st.sampled_from([None, "factual", "Multi-Hop", "multi hop", "recency/conflict"]), st.just("bogus"))


def _some(strategy: st.SearchStrategy, field: str) -> st.SearchStrategy:
    """{field: value} or {} (the field left out)."""
    return st.one_of(st.just({}), strategy.map(lambda v: {field: v}))


def _anchor(extra: dict) -> st.SearchStrategy:
    return st.fixed_dictionaries({"rel_path": REL_PATH}, optional={"heading_path": HEADING, **extra})


SUPPORT = _anchor(
    {
        "snippets": st.lists(TEXT, max_size=2),
        "date": _mostly(st.sampled_from([None, "2024-01-02", "2023-12-31"]), st.sampled_from(["2024-02-30", "x"])),
        "required": st.booleans(),
    }
)
BINARY = _mostly(st.sampled_from([None, 0, 1]), st.just(2))
CHUNK_LABEL = _anchor({"topically_relevant": BINARY, "evidence_sufficient": BINARY, "misleading": BINARY})
ANSWER_LABEL = st.fixed_dictionaries(
    {},
    optional={
        "method": st.one_of(st.none(), TEXT),
        "answer_sha256": _mostly(st.sampled_from([None, "abcdef12"]), st.sampled_from(["ABCDEF12", "abc"])),
        "helpful": BINARY,
        "unsafe_content": BINARY,
    },
)
CASE = st.fixed_dictionaries(
    {"id": _mostly(NAME, st.one_of(TEXT, st.sampled_from(["c1", "c2"]))), "question": _mostly(NAME, TEXT)},
    optional={
        "reference_answer": st.one_of(st.none(), TEXT),
        "answerable": st.booleans(),
        "category": CHOICE,
        "difficulty": _mostly(st.sampled_from([None, "easy", "Hard"]), st.just("extreme")),
        "tags": st.lists(TEXT, max_size=3),
        "vault": st.one_of(st.none(), TEXT),
        "expected_action": _mostly(st.sampled_from([None, "answer", "Refuse"]), st.just("shrug")),
        "gold_supports": st.lists(SUPPORT, max_size=3),
        "required_support_groups": _mostly(st.just([]), st.lists(st.lists(st.integers(0, 3), max_size=2), max_size=2)),
        "recency_conflict_rule": _mostly(st.sampled_from([None, "cite_both"]), st.just("cite newer")),
        "labels": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={"chunks": st.lists(CHUNK_LABEL, max_size=2), "answers": st.lists(ANSWER_LABEL, max_size=2)},
            ),
        ),
        "metadata": st.one_of(st.dictionaries(TEXT, JSON, max_size=3), st.fixed_dictionaries({"n": FLOAT, "s": TEXT})),
    },
)
CHUNK = _anchor({"text": TEXT, "score": st.one_of(st.none(), FLOAT), "chunk_id": st.one_of(st.none(), TEXT)}).flatmap(
    lambda c: st.integers(1, 30).map(lambda rank: {**c, "rank": rank})
)
LATENCY = st.fixed_dictionaries({}, optional={s: st.one_of(st.none(), FLOAT) for s in ("retrieval", "total", "wall")})
CAPTURE = st.fixed_dictionaries(
    {"case_id": _mostly(NAME, st.one_of(TEXT, st.sampled_from(["c1", "c2"])))},
    optional={
        "answer": st.one_of(st.none(), TEXT),
        "abstained": st.one_of(st.none(), st.booleans()),
        "references": st.lists(_anchor({}), max_size=2),
        "retrieved": st.lists(CHUNK, max_size=4),
        "method": st.one_of(st.none(), TEXT),
        "status": _mostly(st.sampled_from(["ok", "error", "timeout", "empty"]), st.just("weird")),
        "error": st.one_of(st.none(), TEXT),
        "latency_ms": LATENCY,
        "folder_mode": _mostly(st.sampled_from([None, "off", "On", "on with fallback"]), st.just("sideways")),
        "selected_folders": st.lists(TEXT, max_size=2),
        "attempts": _mostly(st.integers(1, 3), st.just(0)),
        "cost_usd": st.one_of(st.none(), FLOAT),
    },
)
EXTRAS = st.lists(st.sampled_from(["", "// a comment", "   ", '{"id": "x", "colour": 1}', "{bad json"]), max_size=2)
FORMS = st.fixed_dictionaries(
    {"compact": st.booleans(), "ascii_only": st.booleans(), "block": st.sampled_from([80, 600, 1 << 22])}
)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(cases=st.lists(CASE, min_size=1, max_size=6), forms=FORMS, extras=st.one_of(st.just([]), EXTRAS))
def test_generated_golden_sets_spool_as_the_per_record_path_does(cases, forms, extras, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(ingest, "BLOCK_BYTES", forms["block"])  # small blocks: bulk and per-record blocks mixed
    path = _write(tmp_path / "g.jsonl", cases, compact=forms["compact"], ascii_only=forms["ascii_only"], extras=extras)
    _assert_same(path, GoldenCase, "id")


@SETTINGS
@given(captures=st.lists(CAPTURE, min_size=1, max_size=6), forms=FORMS, extras=st.one_of(st.just([]), EXTRAS))
def test_generated_capture_files_spool_as_the_per_record_path_does(captures, forms, extras, tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "BLOCK_BYTES", forms["block"])
    extras = [e.replace('"id"', '"case_id"') for e in extras]
    path = _write(
        tmp_path / "c.jsonl", captures, compact=forms["compact"], ascii_only=forms["ascii_only"], extras=extras
    )
    _assert_same(path, Capture, "case_id")


# ---- ordinary files take the bulk path ------------------------------------------------------------------

GOLDEN_LINES = [
    {
        "id": "c1",
        "question": 'Q "quoted" line\nbreak\ttab \x01 é 😀 \u2028',
        "category": "Multi-Hop",
        "tags": ["x", "y"],
    },
    {
        "id": "c2",
        "question": "Q2",
        "answerable": False,
        "gold_supports": [
            {"rel_path": " ./a.md ", "heading_path": " A  > B ", "date": "2024-01-02", "snippets": ["s"]},
            {"rel_path": "b.md", "heading_path": "X > Y/Z", "required": True},
        ],
        "required_support_groups": [[0], [0, 1]],
        "recency_conflict_rule": "cite newer",
        "labels": {"chunks": [{"rel_path": "a.md", "topically_relevant": 1}], "answers": [{"helpful": 0}]},
        "metadata": {"z": 1, "a": [1.5, 2], "o": {"b": None}, "big": 12345678901, "tiny": 1e-7, "s": "é"},
    },
    {"id": "c3", "question": "Q3", "labels": {}, "metadata": {"n": -0.0}},
]
CAPTURE_LINES = [
    {
        "case_id": "c1",
        "answer": 'A "q" \\ \n',
        "retrieved": [
            {"rank": 3, "rel_path": "./b.md", "heading_path": "B > C", "text": "t\x00", "score": 0.25},
            {"rank": 1, "rel_path": "a.md", "score": 7, "chunk_id": "k"},
            {"rank": 2, "rel_path": "a.md", "score": 1e-9},
        ],
        "references": [{"rel_path": "a.md", "heading_path": "A"}],
        "latency_ms": {"total": 12.5, "wall": 3},
        "folder_mode": "On",
        "cost_usd": 0.0012,
        "method": "m",
    },
    {"case_id": "c2", "answer": None, "status": "ok", "attempts": 2},
    {"case_id": "c3", "answer": "  ", "abstained": True, "cost_usd": 2e10},
]


@pytest.mark.parametrize("compact", [True, False])
def test_ordinary_files_are_spooled_in_bulk_byte_for_byte(compact: bool, tmp_path: Path) -> None:
    golden = _write(tmp_path / "g.jsonl", GOLDEN_LINES, compact=compact, ascii_only=not compact)
    captures = _write(tmp_path / "c.jsonl", CAPTURE_LINES, compact=compact, ascii_only=False)
    assert all(isinstance(b, Canonical) for b in golden_blocks(golden)), "read in bulk"
    assert all(isinstance(b, Canonical) for b in capture_blocks(captures)), "read in bulk"
    _assert_same(golden, GoldenCase, "id")
    _assert_same(captures, Capture, "case_id")
    assert spool_captures(captures)[1] == {"m": 1}


def test_a_file_of_many_blocks_reports_a_duplicate_across_blocks_at_its_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 200)
    cases = [{"id": f"c{i}", "question": f"Q{i}"} for i in range(40)] + [{"id": "c3", "question": "again"}]
    path = _write(tmp_path / "g.jsonl", cases, compact=True, ascii_only=True)
    assert sum(isinstance(b, Canonical) for b in golden_blocks(path)) > 5
    with pytest.raises(InputError) as e:
        load_golden(path)
    assert (e.value.line, e.value.field) == (41, "id") and "first used at line 4" in e.value.message
    _assert_same(path, GoldenCase, "id")


def test_a_bad_record_in_a_later_block_is_named_by_the_per_record_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 200)
    captures = [{"case_id": f"c{i}", "answer": "a"} for i in range(30)]
    captures[25]["retrieved"] = [{"rank": 0, "rel_path": "a.md"}]
    path = _write(tmp_path / "c.jsonl", captures, compact=True, ascii_only=True)
    with pytest.raises(InputError) as e:
        spool_captures(path)
    assert e.value.line == 26 and e.value.field == "retrieved[0].rank"
    _assert_same(path, Capture, "case_id")


def test_floats_outside_the_safe_range_are_written_by_the_model(tmp_path: Path) -> None:
    """Arrow and pydantic write 1e-06 and 1e+10 differently: such a record is dumped by its model."""
    captures = [
        {"case_id": f"c{i}", "retrieved": [{"rank": 1, "rel_path": "a", "score": v}]}
        for i, v in enumerate([1e-6, 1e10, 0.5])
    ]
    path = _write(tmp_path / "c.jsonl", captures, compact=True, ascii_only=True)
    (block,) = list(capture_blocks(path))
    assert isinstance(block, Canonical)
    data = bytes(block.data(block.lines)[0])
    assert b'"score":1e-6' in data and b'"score":10000000000.0' in data
    _assert_same(path, Capture, "case_id")


class _Float(BaseModel):
    x: float


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_float_text_is_pydantics_inside_the_safe_range(values: list[float]) -> None:
    text = jt.values(pa.array(values, pa.float64()))
    for value, written, odd in zip(values, text.text.to_pylist(), text.odd.tolist()):
        inside = value == 0 or jt.FLOAT_SAFE[0] <= abs(value) < jt.FLOAT_SAFE[1]
        assert odd == (not inside)
        if inside:
            assert written == _Float(x=value).model_dump_json()[len('{"x":') : -1]


# ---- a bug: pyarrow's reader ended the process on deep nesting -------------------------------------------


def _error_line(reader: str, path: Path) -> str:
    """The line of the InputError `reader` raises on the file, run in a child process: a crash fails the test
    instead of losing a worker."""
    module = "raglake.columnar.golden" if reader == "read_golden_columns" else "raglake.golden"
    code = (
        "import raglake.columnar.ingest\nraglake.columnar.ingest.BULK_MIN_BYTES = 0\n"  # read in bulk, however small
        f"from {module} import {reader}\nfrom raglake.errors import InputError\n"
        f"try:\n    {reader}({str(path)!r})\nexcept InputError as e:\n    print(e.line)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def _valid(reader: str) -> str:
    return '{"case_id": "a"}' if reader == "spool_captures" else '{"id": "a", "question": "q"}'


@pytest.mark.parametrize("reader", ["read_golden_columns", "load_golden", "spool_captures"])
def test_deeply_nested_json_is_an_input_error_not_a_crash(reader: str, tmp_path: Path) -> None:
    """pyarrow's JSON reader overflows its stack on nesting ~10,000+ deep (SIGSEGV): such a line is left to the
    per-record reader, which names it."""
    deep = "[" * 100_000 + "]" * 100_000
    key, field = ("case_id", "error") if reader == "spool_captures" else ("id", "metadata")
    path = tmp_path / "deep.jsonl"
    path.write_text(f'{_valid(reader)}\n{{"{key}": "b", "{field}": {{"x": {deep}}}}}\n')
    assert _error_line(reader, path) == "2"


@pytest.mark.parametrize("reader", ["read_golden_columns", "load_golden", "spool_captures"])
@pytest.mark.parametrize("first", ["null", "1", "[]", '"text"'])
def test_a_first_line_that_is_not_an_object_is_an_input_error_not_a_crash(reader: str, first: str, tmp_path: Path):
    """pyarrow's JSON reader ends the process (SIGSEGV) on a file whose first line is `null`."""
    path = tmp_path / "f.jsonl"
    path.write_text(f"{first}\n{_valid(reader)}\n")
    assert _error_line(reader, path) == "1"


def test_a_capture_file_whose_first_record_is_ragas_shaped_is_read_as_one_throughout(tmp_path: Path, monkeypatch):
    """The first record's shape decides the file's (iter_captures): a later block in raglake's shape is not
    read in bulk as raglake's, as the per-record path would not read it so either."""
    monkeypatch.setattr(ingest, "BLOCK_BYTES", 100)
    records = [{"user_input": "q", "response": "a", "retrieved_contexts": ["x"]}]
    records += [{"case_id": f"c{i}", "answer": "a"} for i in range(10)]
    path = _write(tmp_path / "c.jsonl", records, compact=True, ascii_only=True)
    expected = _outcome(lambda: [capture.model_dump_json() for _, capture in iter_captures(path)])
    spool = _outcome(lambda: spool_captures(path)[0])
    assert expected == spool if isinstance(spool, str) else [c.model_dump_json() for c in spool] == expected


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(value=JSON, ascii_only=st.booleans(), window=st.integers(1, 16))
def test_the_nesting_check_counts_as_a_json_parser_does(value, ascii_only: bool, window: int) -> None:
    """Brackets and escaped quotes inside strings are not nesting (a long answer full of brackets is read in
    bulk); the depth is the parsed value's, whatever the window the line is scanned in."""
    text = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert nesting(text) == nesting(text, window) == _depth(value)


def test_a_long_text_full_of_brackets_is_still_read_in_bulk(tmp_path: Path) -> None:
    answer = 'see [1] and {2} "quoted \\" [' * 2000
    path = _write(tmp_path / "c.jsonl", [{"case_id": "c1", "answer": answer}], compact=True, ascii_only=True)
    assert all(isinstance(b, Canonical) for b in capture_blocks(path))
    _assert_same(path, Capture, "case_id")


@pytest.mark.parametrize("reader", ["read_golden_columns", "read_capture_columns"])
def test_invalid_utf8_is_an_input_error_in_the_columnar_reader_too(reader: str, tmp_path: Path) -> None:
    """pyarrow's JSON reader takes any bytes inside a string: the columnar reader of a user's files
    (score_files, ColumnarBatch.from_files) decodes them first, as the per-record path does."""
    golden = reader == "read_golden_columns"
    first, second = (
        ('{"id": "c1", "question": "Q"}', '{"id": "c2", "question": "Q\xff"}')
        if golden
        else ('{"case_id": "c1"}', '{"case_id": "c2", "answer": "A\xff"}')
    )
    path = tmp_path / "f.jsonl"
    path.write_bytes(f"{first}\n{second}\n".encode("latin-1"))
    read = read_golden_columns if reader == "read_golden_columns" else read_capture_columns
    with pytest.raises(InputError) as e:
        read(path)
    assert e.value.line == 2 and "invalid UTF-8" in e.value.message


def test_a_file_under_the_threshold_is_read_record_by_record_to_the_same_bytes(tmp_path: Path, monkeypatch) -> None:
    """A small file skips the bulk reader's one-time costs (a cold run of 20 cases); the bytes are the same."""
    path = _write(tmp_path / "g.jsonl", GOLDEN_LINES, compact=True, ascii_only=False)
    bulk = _ours(path, GoldenCase)
    monkeypatch.setattr(ingest, "BULK_MIN_BYTES", path.stat().st_size + 1)
    assert not ingest.worth_reading_in_bulk(path)
    assert _ours(path, GoldenCase) == bulk
