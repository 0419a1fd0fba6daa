"""Fuzzing the golden-set and capture-file readers (issue 10): random bytes, random JSON values, random
unicode (line separators, lone surrogates, a BOM) and mutated record files, written as .jsonl, .json and
.yaml. Every input is either accepted or rejected with an InputError naming the file and a line of it;
never another exception. What is accepted can be hashed and stored (valid UTF-8, finite numbers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from raglake.errors import InputError
from raglake.golden import load_golden
from raglake.targets.replay import ReplayFile

FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SUFFIXES = st.sampled_from([".jsonl", ".json", ".yaml"])
NO_LINE = ("the golden set has no cases", "the capture file is empty")  # about the whole file, no line to name
SPECIAL = list('\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e\ufeff\ud800\udbff\udc00\udfff\x00\r\n\t "\\{}[]:,#-')
CHARS = st.one_of(st.characters(), st.sampled_from(SPECIAL))
TEXT = st.text(CHARS, max_size=12)
KEYS = [
    "id",
    "question",
    "case_id",
    "answer",
    "tags",
    "answerable",
    "metadata",
    "gold_supports",
    "retrieved",
    "rank",
    "score",
    "rel_path",
    "heading_path",
    "latency_ms",
    "total",
    "cases",
    "captures",
    "contexts",
    "user_input",
    "required",
    "labels",
    "abstained",
    "attempts",
    "category",
    "required_support_groups",
]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    TEXT,
    st.sampled_from(["a", "q", "yes", "1", "0.5", "NaN", " "]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(st.sampled_from(KEYS), TEXT), inner, max_size=5)
    ),
    max_leaves=16,
)
CHUNK = st.fixed_dictionaries(
    {"rank": st.one_of(st.integers(-1, 4), SCALARS)},
    optional={
        "rel_path": st.one_of(st.just("a.md"), TEXT),
        "score": st.one_of(st.floats(), SCALARS),
        "text": TEXT,
        "heading_path": st.one_of(TEXT, st.lists(SCALARS, max_size=3)),
    },
)
GOLDEN = st.fixed_dictionaries(
    {"id": st.one_of(st.sampled_from(["a", "b", " "]), st.integers(), TEXT), "question": st.one_of(st.just("q"), TEXT)},
    optional={
        "answerable": SCALARS,
        "tags": st.lists(st.one_of(st.just("x"), TEXT), max_size=3),
        "metadata": VALUES,
        "category": st.one_of(st.sampled_from(["factual", "mutli-hop"]), TEXT),
        "labels": VALUES,
        "gold_supports": st.lists(
            st.fixed_dictionaries(
                {"rel_path": st.one_of(st.just("a.md"), TEXT)}, optional={"required": SCALARS, "snippets": VALUES}
            ),
            max_size=2,
        ),
        "required_support_groups": VALUES,
        "contexts": VALUES,
    },
)
CAPTURE = st.fixed_dictionaries(
    {"case_id": st.one_of(st.sampled_from(["a", "b", ""]), st.integers(), TEXT)},
    optional={
        "answer": st.one_of(TEXT, SCALARS),
        "abstained": SCALARS,
        "retrieved": st.lists(CHUNK, max_size=3),
        "latency_ms": st.dictionaries(st.sampled_from(["total", "wall", "retrieval"]), SCALARS, max_size=2),
        "attempts": SCALARS,
        "status": st.one_of(st.just("ok"), TEXT),
        "references": VALUES,
    },
)


def _serialise(draw: st.DrawFn, records: object, suffix: str, list_key: str) -> bytes:
    ascii_only = draw(st.booleans())
    if suffix == ".jsonl" and isinstance(records, list):
        text = draw(st.sampled_from(["\n", "\r\n"])).join(json.dumps(r, ensure_ascii=ascii_only) for r in records)
    elif suffix == ".yaml":
        try:
            text = yaml.safe_dump(records, allow_unicode=not ascii_only)
        except (yaml.YAMLError, UnicodeError):
            text = json.dumps(records, ensure_ascii=ascii_only)
    else:
        wrapped = {list_key: records} if draw(st.booleans()) else records
        text = json.dumps(wrapped, ensure_ascii=ascii_only, indent=draw(st.sampled_from([None, 1])))
    if draw(st.integers(0, 3)) == 0:  # the same key twice in one object
        text = text.replace('{"', '{"id": "d", "', 1)
    data = text.encode("utf-8", errors="surrogatepass")  # a lone surrogate becomes invalid UTF-8
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + data


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """The bytes as they are, cut short, with random bytes spliced in, or with one byte changed."""
    how = draw(st.sampled_from(["keep", "keep", "keep", "cut", "splice", "flip"]))
    if how == "keep" or not data:
        return data
    at = draw(st.integers(0, len(data) - 1))
    if how == "cut":
        return data[:at]
    if how == "splice":
        return data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]


@st.composite
def record_files(draw: st.DrawFn, records: st.SearchStrategy, list_key: str) -> tuple[str, bytes]:
    suffix = draw(SUFFIXES)
    data = _serialise(draw, draw(st.lists(records, min_size=1, max_size=3)), suffix, list_key)
    return suffix, draw(mutated(data))


def _accepted_or_input_error(load, folder: Path, suffix: str, data: bytes):
    path = folder / f"input{suffix}"
    path.write_bytes(data)
    try:
        result = load(path)
    except InputError as e:
        event(f"rejected: {e.message.split(':')[0][:40]}")
        assert e.path == str(path)
        if e.line is None:
            assert e.message in NO_LINE, e
        else:
            assert 1 <= e.line <= data.count(b"\n") + 1, e
        str(e).encode("utf-8")  # printable: the CLI writes it to the terminal
        return None
    event("accepted")
    return result


def _check_golden(folder: Path, suffix: str, data: bytes) -> None:
    golden = _accepted_or_input_error(load_golden, folder, suffix, data)
    if golden is not None:  # hashed already; what lands must be valid UTF-8 JSON without NaN
        json.dumps([c.model_dump(mode="json") for c in golden.cases], ensure_ascii=False, allow_nan=False).encode()


def _check_captures(folder: Path, suffix: str, data: bytes) -> None:
    target = _accepted_or_input_error(lambda p: ReplayFile(str(p)), folder, suffix, data)
    if target is not None:
        for capture in target._spool:  # the validated captures
            json.dumps(capture.model_dump(mode="json"), ensure_ascii=False, allow_nan=False).encode()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(suffix=SUFFIXES, data=st.binary(max_size=200))
def test_random_bytes(folder: Path, suffix: str, data: bytes) -> None:
    _check_golden(folder, suffix, data)
    _check_captures(folder, suffix, data)


@FUZZ
@given(suffix=SUFFIXES, text=st.text(CHARS, max_size=80), bom=st.booleans())
def test_random_unicode(folder: Path, suffix: str, text: str, bom: bool) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", errors="surrogatepass")
    _check_golden(folder, suffix, data)
    _check_captures(folder, suffix, data)


@FUZZ
@given(st.data())
def test_random_json_values(folder: Path, data: st.DataObject) -> None:
    suffix = data.draw(SUFFIXES)
    value = data.draw(st.one_of(VALUES, st.lists(VALUES, min_size=1, max_size=3)))
    raw = _serialise(
        data.draw,
        value if isinstance(value, list) else [value],
        suffix,
        data.draw(st.sampled_from(["cases", "captures"])),
    )
    _check_golden(folder, suffix, raw)
    _check_captures(folder, suffix, raw)


@FUZZ
@given(file=record_files(GOLDEN, "cases"))
def test_golden_shaped_files(folder: Path, file: tuple[str, bytes]) -> None:
    _check_golden(folder, *file)


@FUZZ
@given(file=record_files(CAPTURE, "captures"))
def test_capture_shaped_files(folder: Path, file: tuple[str, bytes]) -> None:
    _check_captures(folder, *file)
