"""Assertions (promptfoo-style, deterministic): every type's pass, fail and undefined with its reason, the
specs' validation (promptfoo's names, invalid regex, bad JSON Schema, unknown type or key with "did you
mean"), a golden case's own `assert:` list in JSONL and YAML files (errors name file, line and field) and
through the columnar reader, the eval file's assertions as registered metrics, and a run that lands both."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from raglake.assertion_specs import STAGES, AssertionSpec
from raglake.columnar.golden import golden_from_models, read_golden_columns
from raglake.errors import ConfigError, InputError
from raglake.golden import content_hash, load_golden
from raglake.metrics.assertion_checks import cited_chunks, evaluate
from raglake.metrics.assertions import assertion_metric, question_assertions, register_assertions, spec_version
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import Score, get_metric, remove_metric
from raglake.schemas import LATENCY_STAGES, Capture, GoldenCase

SPEC = TypeAdapter(AssertionSpec)
ANSWER = "Refunds take 14 days under policy PN-1234 [2]. See work/atlas.md."


def spec(**data):
    return SPEC.validate_python(data)


def cap(answer: str = ANSWER, **kw) -> Capture:
    chunks = [
        {"rank": 1, "rel_path": "work/atlas.md", "heading_path": "Atlas > Refunds", "text": "t"},
        {"rank": 2, "rel_path": "work/billing.md", "text": "t"},
        {"rank": 3, "rel_path": "work/atlas.md", "heading_path": "Atlas > Other", "text": "t"},
    ]
    return Capture.model_validate({"case_id": "c", "answer": answer, "retrieved": chunks, **kw})


def check(spec_data: dict, capture: Capture | None = None) -> Score:
    return evaluate(spec(**spec_data), capture or cap())


# ---- every type: pass, fail, undefined, with the reason ---------------------------------------------------

CASES = [
    # contains (case-sensitive, as promptfoo's), icontains, lists with all / any
    ({"type": "contains", "value": "PN-1234"}, 1.0, "contains 'PN-1234': found"),
    ({"type": "contains", "value": "refund"}, 0.0, "contains 'refund': not found"),
    ({"type": "contains", "value": "refund", "case_sensitive": False}, 1.0, "icontains 'refund': found"),
    ({"type": "icontains", "value": "REFUNDS"}, 1.0, "icontains 'REFUNDS': found"),
    (
        {"type": "contains", "value": ["14 days", "30 days", "PN"]},
        0.0,
        "contains all of ['14 days', '30 days', 'PN']: '30 days' not found",
    ),
    ({"type": "contains", "value": ["14 days", "PN"]}, 1.0, "contains all of ['14 days', 'PN']: all found"),
    ({"type": "contains-any", "value": ["30 days", "PN"]}, 1.0, "contains any of ['30 days', 'PN']: 'PN' found"),
    (
        {"type": "contains", "value": ["a year", "30 days"], "match": "any"},
        0.0,
        "contains any of ['a year', '30 days']: none found",
    ),
    # not-contains: a list is of forbidden strings (match any); match all fails only when every one is found
    ({"type": "not-contains", "value": "dosage"}, 1.0, "not-contains 'dosage': not found"),
    ({"type": "not-contains", "value": "policy"}, 0.0, "not-contains 'policy': found"),
    ({"type": "not-contains", "value": ["mg", "days"]}, 0.0, "not-contains any of ['mg', 'days']: 'days' found"),
    ({"type": "not-icontains", "value": ["MG", "DOSE"]}, 1.0, "not-icontains any of ['MG', 'DOSE']: none found"),
    ({"type": "not-contains-all", "value": ["mg", "days"]}, 1.0, "not-contains all of ['mg', 'days']: 'mg' not found"),
    (
        {"type": "not-contains", "value": ["PN", "days"], "match": "all"},
        0.0,
        "not-contains all of ['PN', 'days']: all found",
    ),
    # regex (Python re, searched), not-regex; promptfoo's `value` for the pattern
    ({"type": "regex", "pattern": r"PN-\d{4}"}, 1.0, r"regex 'PN-\d{4}' found: 'PN-1234'"),
    ({"type": "regex", "pattern": r"PN-\d{5}"}, 0.0, r"regex 'PN-\d{5}' not found"),
    (
        {"type": "regex", "value": "pn-[0-9]+", "case_sensitive": False},
        1.0,
        "regex (ignoring case) 'pn-[0-9]+' found: 'PN-1234'",
    ),
    ({"type": "not-regex", "pattern": r"\d+ ?mg"}, 1.0, r"not-regex '\d+ ?mg' not found"),
    ({"type": "not-regex", "pattern": r"\d+ days"}, 0.0, r"not-regex '\d+ days' found: '14 days'"),
    # equals
    ({"type": "equals", "value": ANSWER}, 1.0, f"equals '{ANSWER[:59]}…'"),
    ({"type": "equals", "value": "Yes"}, 0.0, f"equals 'Yes': the answer is '{ANSWER[:59]}…'"),
    # max-length (the trimmed answer), in characters and words
    ({"type": "max-length", "chars": 400}, 1.0, f"answer is {len(ANSWER)} of 400 characters"),
    ({"type": "max-length", "chars": 40}, 0.0, f"answer is {len(ANSWER)} characters; max-length 40"),
    ({"type": "max-length", "words": 5}, 0.0, "answer is 10 words; max-length 5 words"),
    (
        {"type": "max-length", "chars": 400, "words": 20},
        1.0,
        f"answer is {len(ANSWER)} of 400 characters and 10 of 20 words",
    ),
    # cites: [2] cites rank 2; the path work/atlas.md cites that document's best-ranked chunk (rank 1)
    ({"type": "cites"}, 1.0, "cites 2 of the 3 retrieved chunks (ranks 1, 2)"),
    ({"type": "cites", "at_least": 3}, 0.0, "cites 2 of the 3 retrieved chunks (ranks 1, 2); cites needs 3"),
    # latency: the target's total where it reports one, else wall; or the stage named
    ({"type": "latency-below", "ms": 1000}, 1.0, "latency wall 812 ms (below 1,000 ms)"),
    ({"type": "latency", "threshold": 500}, 0.0, "latency wall 812 ms; latency-below 500 ms"),
    ({"type": "latency-below", "ms": 100, "stage": "retrieval"}, 1.0, "latency retrieval 20.5 ms (below 100 ms)"),
]


@pytest.mark.parametrize("data, value, reason", CASES, ids=[f"{c[0]['type']}-{i}" for i, c in enumerate(CASES)])
def test_each_type_passes_or_fails_with_a_reason(data: dict, value: float, reason: str) -> None:
    s = check(data, cap(latency_ms={"retrieval": 20.5, "wall": 812}))
    assert (s.status, s.value, s.reason) == ("ok", value, reason)


def test_is_json_with_and_without_a_schema() -> None:
    schema = {"type": "object", "properties": {"price": {"type": "number"}}, "required": ["price"]}
    assert check({"type": "is-json"}, cap(' {"price": 3} ')).reason == "is-json: valid JSON"
    bad = check({"type": "is-json"}, cap("price: 3"))
    assert (bad.value, bad.reason) == (0.0, "is-json: not JSON (Expecting value: line 1 column 1 (char 0))")
    good = check({"type": "is-json", "schema": schema}, cap('{"price": 3.5}'))
    assert (good.value, good.reason) == (1.0, "is-json: valid JSON under the schema")
    wrong = check({"type": "is-json", "schema": schema}, cap('{"price": "abc"}'))
    assert wrong.value == 0.0
    assert wrong.reason == "is-json: not valid under the schema at /price: 'abc' is not of type 'number'"
    missing = check({"type": "is-json", "value": schema}, cap("{}"))  # promptfoo's `value` holds the schema
    assert missing.reason == "is-json: not valid under the schema at /: 'price' is a required property"


def test_undefined_when_an_assertion_cannot_apply() -> None:
    no_latency = check({"type": "latency-below", "ms": 100}, cap(latency_ms={}))
    assert (no_latency.status, no_latency.reason) == ("undefined", "latency-below: no wall latency in the capture")
    no_stage = check({"type": "latency-below", "ms": 100, "stage": "total"}, cap(latency_ms={"wall": 3}))
    assert (no_stage.status, no_stage.reason) == ("undefined", "latency-below: no total latency in the capture")
    total = check({"type": "latency-below", "ms": 100}, cap(latency_ms={"total": 99.5, "wall": 300}))
    assert (total.value, total.reason) == (1.0, "latency total 99.5 ms (below 100 ms)")
    cost = check({"type": "cost-below", "usd": 0.01})
    assert (cost.status, cost.reason) == ("undefined", "cost-below: the target reports no cost")
    assert math.isnan(cost.value)
    nothing = Capture.model_validate({"case_id": "c", "answer": "See [1]."})
    cites = check({"type": "cites"}, nothing)
    assert (cites.status, cites.reason) == ("undefined", "cites: no retrieved chunk to cite")


def test_an_empty_answer_is_an_answer() -> None:
    empty = cap("", abstained=True)
    assert check({"type": "contains", "value": "x"}, empty).value == 0.0
    assert check({"type": "not-contains", "value": "x"}, empty).value == 1.0
    assert check({"type": "max-length", "chars": 0}, empty).value == 1.0
    assert check({"type": "cites"}, empty).reason == "cites 0 of the 3 retrieved chunks; cites needs 1"


def test_what_counts_as_citing_a_chunk() -> None:
    def ranks(answer: str, references=()) -> list[int]:
        return cited_chunks(cap(answer, references=list(references)))

    assert ranks("No citation.") == []
    assert ranks("Yes [1], and [2, 3].") == [1, 2, 3]
    assert ranks("Yes [Source 3] [source: 2] [doc 9].") == [2, 3]  # rank 9 was not retrieved
    assert ranks("As work/atlas.md says.") == [1]  # a document: its best-ranked chunk
    assert ranks("As atlas.md says [3].") == [3]  # a marker cites a chunk of it already
    assert ranks("As [[billing]] says.") == [2]  # a wiki link: the file stem
    assert ranks("Nothing here.", [{"rel_path": "work/billing.md"}]) == [2]  # the capture's references
    assert ranks("See other.md and [[ghost]].") == []  # documents no chunk comes from


# ---- the per-question metric -------------------------------------------------------------------------------


def _ctx(asserts: list[dict], capture: Capture | None = None) -> CaseContext:
    case = GoldenCase.model_validate({"id": "c", "question": "How long do refunds take?", "assert": asserts})
    return CaseContext(case, capture or cap(latency_ms={"wall": 812}), ScoringConfig())


def test_question_assertions_all_pass_one_fails_or_none() -> None:
    none = question_assertions(_ctx([]))
    assert (none.status, none.reason) == ("undefined", "no assertions on this question")
    passed = question_assertions(_ctx([{"type": "regex", "pattern": "PN-[0-9]{4}"}, {"type": "cites"}]))
    assert (passed.value, passed.reason) == (1.0, "all 2 passed")
    failed = question_assertions(
        _ctx([{"type": "contains", "value": "refund"}, {"type": "cites"}, {"type": "max-length", "chars": 10}])
    )
    assert failed.value == 0.0
    assert failed.reason == (
        f"2 of 3 failed: assert[0] contains 'refund': not found; "
        f"assert[2] answer is {len(ANSWER)} characters; max-length 10"
    )


def test_question_assertions_undefined_only_when_none_fails() -> None:
    undecided = question_assertions(_ctx([{"type": "cites"}, {"type": "cost-below", "usd": 1}]))
    assert undecided.status == "undefined"
    assert undecided.reason == "1 of 2 undecided, none failed: assert[1] cost-below: the target reports no cost"
    failed = question_assertions(_ctx([{"type": "cost-below", "usd": 1}, {"type": "equals", "value": "x"}]))
    assert failed.value == 0.0 and failed.reason.startswith("1 of 2 failed: assert[1] equals 'x'")


def test_question_assertions_is_a_registered_builtin() -> None:
    m = get_metric("question_assertions")
    assert (m.family, m.origin, m.scale, m.higher_is_better, m.level) == (
        "assertion",
        "builtin",
        "binary",
        True,
        "case",
    )


# ---- the specs: promptfoo's names, versions and validation -------------------------------------------------


def test_promptfoo_names_are_the_canonical_specs() -> None:
    assert spec(type="icontains-any", value=["a", "b"]) == spec(
        type="contains", value=["a", "b"], match="any", case_sensitive=False
    )
    assert spec(type="latency", threshold=500) == spec(type="latency-below", ms=500)
    assert spec(type="cost", threshold=0.01) == spec(type="cost-below", usd=0.01)
    assert spec(type="regex", value="x") == spec(type="regex", pattern="x")
    # the version hashes the canonical spec: the same however written, new when anything changes
    assert spec_version(spec(type="icontains", value="a")) == spec_version(
        spec(type="contains", value="a", case_sensitive=False)
    )
    assert spec_version(spec(type="contains", value="a")) != spec_version(spec(type="contains", value="b"))
    assert spec_version(spec(type="contains", value="a")).startswith("1+")


def test_latency_stages_are_the_captures() -> None:
    assert STAGES == LATENCY_STAGES


@pytest.mark.parametrize(
    "data, message",
    [
        ({"type": "regex", "pattern": "PN-["}, "invalid regex 'PN-[': unterminated character set at position 3"),
        ({"type": "regex"}, "Field required"),
        ({"type": "rgex", "pattern": "x"}, "unknown assertion type 'rgex' (did you mean 'regex'?); one of contains,"),
        ({"type": "regex", "patern": "x"}, "unknown key 'patern' in a regex assertion (did you mean 'pattern'?)"),
        (
            {"type": "is-json", "schema": {"type": "nope"}},
            "schema is not a valid JSON Schema (at /type): 'nope' is not",
        ),
        ({"type": "is-json", "schema": {"minLength": -1}}, "schema is not a valid JSON Schema (at /minLength): -1 is"),
        ({"pattern": "x"}, "an assertion needs a `type`: one of contains, not-contains, regex"),
        ("contains refund", "an assertion is a mapping with a `type`"),
        ({"type": "contains", "value": ""}, "an empty string is in every answer"),
        ({"type": "contains", "value": []}, "`value` is an empty list"),
        ({"type": "max-length"}, "max-length needs `chars` or `words` (or both)"),
        ({"type": "icontains", "value": "a", "case_sensitive": True}, "type 'icontains' sets case_sensitive=False"),
        ({"type": "latency-below", "ms": 0}, "greater than 0"),
        ({"type": "latency-below", "ms": 5, "stage": "tot"}, "Input should be 'folder_selection'"),
        ({"type": "cites", "at_least": 0}, "greater than or equal to 1"),
        ({"type": "contains", "value": "a", "case_sensitive": "no"}, "Input should be a valid boolean"),
    ],
)
def test_invalid_specs_say_what_is_wrong(data, message: str) -> None:
    with pytest.raises(ValidationError) as e:
        SPEC.validate_python(data)
    assert message in str(e.value)


# ---- a golden case's own `assert:` list --------------------------------------------------------------------


def _line(case: dict) -> str:
    return json.dumps(case) + "\n"


def test_a_golden_case_carries_its_assertions_and_a_case_without_dumps_as_before(tmp_path: Path) -> None:
    plain = {"id": "a", "question": "q?"}
    asserted = {"id": "b", "question": "q?", "assert": [{"type": "icontains", "value": "refund"}]}
    path = tmp_path / "golden.jsonl"
    path.write_text(_line(plain) + _line(asserted))
    golden = load_golden(path)
    a, b = golden.cases[0], golden.cases[1]
    assert a.assertions == [] and b.assertions == [spec(type="contains", value="refund", case_sensitive=False)]
    assert "assert" not in a.model_dump_json() and a.model_dump_json().endswith(',"metadata":{}}')
    dumped = json.loads(b.model_dump_json())
    assert dumped["assert"] == [{"type": "contains", "value": "refund", "match": "all", "case_sensitive": False}]
    assert list(dumped)[-1] == "metadata"  # the cases table reads a canonical line's metadata last
    # a canonical dump reads back the same; a case without assertions hashes as before the field existed
    assert GoldenCase.model_validate_json(b.model_dump_json(), context={"canonical": True}) == b
    assert "assert" not in a.model_dump(mode="json") and "assertions" not in a.model_dump(mode="json")
    assert content_hash([a]) != content_hash([b.model_copy(update={"id": "a"})])


def test_an_invalid_assertion_in_a_jsonl_golden_set_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "golden.jsonl"
    bad = {
        "id": "c",
        "question": "q?",
        "assert": [{"type": "contains", "value": "x"}, {"type": "regex", "pattern": "("}],
    }
    path.write_text(_line({"id": "a", "question": "q?"}) + "\n" + _line(bad))
    with pytest.raises(InputError) as e:
        load_golden(path)
    assert (e.value.path, e.value.line, e.value.field) == (str(path), 3, "assert[1].regex.pattern")
    assert "invalid regex '(': missing ), unterminated subpattern at position 0" in str(e.value)
    path.write_text(_line({"id": "a", "question": "q?", "assert": [{"type": "contians", "value": "x"}]}))
    with pytest.raises(InputError) as e:
        load_golden(path)
    assert (e.value.line, e.value.field) == (1, "assert[0]")
    assert "unknown assertion type 'contians' (did you mean 'contains'?)" in str(e.value)


def test_an_invalid_assertion_in_a_yaml_golden_set_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "golden.yaml"
    path.write_text(
        "- id: a\n"
        "  question: How long do refunds take?\n"
        "  assert:\n"
        "    - {type: icontains, value: refund}\n"
        "- id: b\n"
        "  question: Which policy?\n"
        "  reference_answer: PN-1234\n"
        "  assert:\n"
        "    - type: is-json\n"
        "      schema: {type: objekt}\n"
    )
    with pytest.raises(InputError) as e:
        load_golden(path)
    assert (e.value.line, e.value.field) == (8, "assert[0].is-json.schema")
    assert "schema is not a valid JSON Schema (at /type)" in str(e.value)
    path.write_text(path.read_text().replace("objekt", "object"))
    cases = list(load_golden(path).cases)
    assert [len(c.assertions) for c in cases] == [1, 1] and cases[1].assertions[0].json_schema == {"type": "object"}


def test_the_columnar_reader_carries_a_cases_assertions(tmp_path: Path) -> None:
    asserted = {"id": "b", "question": "q?", "assert": [{"type": "regex", "pattern": "PN-[0-9]{4}"}]}
    user = tmp_path / "golden.jsonl"
    user.write_text(_line({"id": "a", "question": "q?"}) + _line(asserted))
    columns = read_golden_columns(user)  # the user's file: read record by record (validated, line by line)
    assert columns.model(1).assertions == [spec(type="regex", pattern="PN-[0-9]{4}")]
    # raglake's own dumps (staged batches) in bulk: the assertions ride along, read by the case's model
    cases = [GoldenCase.model_validate({"id": "a", "question": "q?"}), GoldenCase.model_validate(asserted)]
    staged = tmp_path / "staged.jsonl"
    staged.write_text("".join(c.model_dump_json() + "\n" for c in cases))
    bulk = read_golden_columns(staged, canonical=True)
    assert bulk.models is None and [bulk.model(i) for i in range(2)] == cases
    assert golden_from_models("<cases>", cases).model(1) == cases[1]
    user.write_text(_line({"id": "a", "question": "q?"}) + _line({**asserted, "assert": [{"type": "regex"}]}))
    with pytest.raises(InputError) as e:
        read_golden_columns(user)
    assert (e.value.line, e.value.field) == (2, "assert[0].regex.pattern")


# ---- the eval file's assertions as metrics -----------------------------------------------------------------


def test_an_eval_file_assertion_is_a_metric_of_its_own() -> None:
    regex = spec(type="regex", pattern="PN-[0-9]{4}")
    try:
        assert register_assertions({"cites_pn_t": regex}, "/x/raglake.yaml") == ["cites_pn_t"]
        m = get_metric("cites_pn_t")
        assert (m.family, m.origin, m.scale, m.higher_is_better) == ("assertion", "assertion", "binary", True)
        assert m.version == spec_version(regex) and m.source == "/x/raglake.yaml: assertions.cites_pn_t"
        assert m.inputs == ("answer",) and "regex" in m.description
        # the same definition again replaces itself; a worker unpickles it and scores the same
        register_assertions({"cites_pn_t": regex}, "/x/raglake.yaml")
        again = pickle.loads(pickle.dumps(get_metric("cites_pn_t")))
        ctx = _ctx([])
        assert again.fn(ctx) == m.fn(ctx) == Score.ok(1.0, reason="regex 'PN-[0-9]{4}' found: 'PN-1234'")
    finally:
        remove_metric("cites_pn_t")


def test_an_assertion_may_not_take_a_builtin_name_or_a_bad_one() -> None:
    regex = spec(type="regex", pattern="x")
    with pytest.raises(ConfigError, match="has the name of a built-in metric"):
        register_assertions({"mrr_at_k": regex}, "raglake.yaml")
    with pytest.raises(ConfigError, match=r"raglake.yaml: assertions: 'Cites PN' is not a metric name"):
        register_assertions({"Cites PN": regex}, "raglake.yaml")
    assert assertion_metric("latency_ok", spec(type="latency", threshold=5)).inputs == ("latency_ms",)


# ---- a run: an eval-file assertion and a question's own land rows with reasons --------------------------


def _captures(path: Path, answers: dict[str, str]) -> str:
    chunks = [{"rank": 1, "rel_path": "policy.md", "text": "Refunds take 14 days (PN-1234)."}]
    path.write_text(
        "".join(
            json.dumps({"case_id": cid, "answer": a, "retrieved": chunks, "latency_ms": {"total": 120}}) + "\n"
            for cid, a in answers.items()
        )
    )
    return f"replay:{path}"


@pytest.mark.flow
@pytest.mark.usefixtures("prefect_harness")
def test_a_run_lands_assertion_rows_that_breakdowns_and_comparisons_read(tmp_path: Path, lake_dir: str) -> None:
    from raglake.api.lake import LakeFrames
    from raglake.flows.evaluate import evaluate
    from raglake.gate import GateRules, evaluate_gate
    from raglake.lake.query import fetch
    from raglake.metrics.extensions import Extensions
    from raglake.pipeline.lakes import open_lake
    from raglake.pipeline.rescore import plan_rescore
    from raglake.pipeline.settings import RunSettings

    golden = tmp_path / "golden.jsonl"
    own = [{"type": "icontains", "value": "refund"}, {"type": "cites"}]
    golden.write_text(
        _line({"id": "q1", "question": "How long do refunds take?", "category": "factual", "assert": own})
        + _line({"id": "q2", "question": "Which policy covers refunds?", "category": "factual"})
        + _line({"id": "q3", "question": "Who approves refunds?", "category": "reasoning"})
    )
    extensions = Extensions(
        source=str(tmp_path / "raglake.yaml"), assertions={"cites_pn": {"type": "regex", "pattern": "PN-[0-9]{4}"}}
    )
    answers = {"q1": "Refunds take 14 days [1].", "q2": "Policy PN-1234.", "q3": "Finance approves them."}
    settings = dict(
        golden=str(golden), lake=lake_dir, extensions=extensions, metrics=["cites_pn", "question_assertions"]
    )
    base = evaluate(RunSettings(target=_captures(tmp_path / "a.jsonl", answers), **settings))
    worse = {**answers, "q1": "14 days.", "q2": "Policy 1234."}
    cand = evaluate(RunSettings(target=_captures(tmp_path / "b.jsonl", worse), **settings))

    q = open_lake(lake_dir)
    rows = fetch(
        q.con,
        "SELECT case_id, metric, metric_version, status, if(status = 'ok', value, NULL), reason FROM scores "
        "WHERE run_id = $r "
        "ORDER BY metric, case_id",
        r=base,
    )
    version = spec_version(spec(type="regex", pattern="PN-[0-9]{4}"))
    assert rows == [
        ("q1", "cites_pn", version, "ok", 0.0, "regex 'PN-[0-9]{4}' not found"),
        ("q2", "cites_pn", version, "ok", 1.0, "regex 'PN-[0-9]{4}' found: 'PN-1234'"),
        ("q3", "cites_pn", version, "ok", 0.0, "regex 'PN-[0-9]{4}' not found"),
        ("q1", "question_assertions", "1", "ok", 1.0, "all 2 passed"),
        ("q2", "question_assertions", "1", "undefined", None, "no assertions on this question"),
        ("q3", "question_assertions", "1", "undefined", None, "no assertions on this question"),
    ]
    failed = fetch(
        q.con,
        "SELECT reason FROM scores WHERE run_id = $r AND metric = 'question_assertions' AND case_id = 'q1'",
        r=cand,
    )
    assert failed == [
        (
            "2 of 2 failed: assert[0] icontains 'refund': not found; assert[1] cites 0 of the 1 retrieved chunk; "
            "cites needs 1",
        )
    ]
    frames = LakeFrames(lake_dir)
    by_category = frames.breakdown([base], by="category").set_index(["slice", "metric"])
    assert by_category.loc[("factual", "cites_pn"), "mean"] == 0.5
    assert by_category.loc[("factual", "question_assertions"), "n_undefined"] == 1
    compared = frames.compare(base, cand).set_index("metric")
    assert compared.loc["cites_pn", "diff"] == pytest.approx(-1 / 3)
    assert compared.loc["question_assertions", "diff"] == -1.0
    # the gate checks them as metrics with a direction: both dropped
    rules = GateRules(rules=[{"metric": "cites_pn", "min_pairs": 1}, {"metric": "question_assertions", "min_pairs": 1}])
    checked, _ = evaluate_gate(q, base, cand, rules)
    drops = {r["metric"]: r["drop"] for r in checked if r["dimension"] == "all"}
    assert drops == {"cites_pn": pytest.approx(1 / 3), "question_assertions": 1.0}
    # rescore recomputes an assertion whose spec changed, and only that one
    changed = assertion_metric("cites_pn", spec(type="regex", pattern="PN-[0-9]{5}"))
    decisions = plan_rescore(
        q, [base], [changed, get_metric("question_assertions")], embedder_key=None, judge_model=None
    )
    assert [(d.metric, d.compute) for d in decisions] == [("cites_pn", True), ("question_assertions", False)]
    assert decisions[0].reason == f"metric version {version} → {changed.version}"


# ---- over a whole batch: the same rows as per case, without a model per case --------------------------------

COLUMNAR_SPECS = {
    "t_contains": {"type": "icontains-any", "value": ["refund", "ÉTÉ"]},
    "t_not": {"type": "not-contains", "value": ["mg"]},
    "t_regex": {"type": "regex", "pattern": r"PN-\d{4}"},
    "t_equals": {"type": "equals", "value": "yes", "case_sensitive": False, "normalise_whitespace": True},
    "t_json": {"type": "is-json", "schema": {"type": "object", "required": ["a"]}},
    "t_length": {"type": "max-length", "chars": 12, "words": 3},
    "t_latency": {"type": "latency-below", "ms": 100},
    "t_stage": {"type": "latency-below", "ms": 100, "stage": "generation"},
    "t_cost": {"type": "cost-below", "usd": 0.5},
    "t_cites": {"type": "cites", "at_least": 1},
}


def _batch_pairs() -> list[tuple[GoldenCase, Capture]]:
    answers = [
        "Refunds: PN-1234 [1]",
        " YES \n",
        '{"a": 1}',
        '{"b": 2}',
        "été 20 mg",
        "",
        "x" * 40,
        "Refunds: PN-1234 [1]",
    ]
    latencies = [{"total": 50}, {"wall": 150}, {}, {"total": 120, "wall": 20}, {"generation": 99.5}, {"wall": 100}]
    pairs = []
    for i, answer in enumerate(answers):
        own = [{"type": "contains", "value": "PN"}, {"type": "latency-below", "ms": 100}] if i % 3 == 0 else []
        meta = {"assert": "not an assertion"} if i == 1 else {}  # the key's text in metadata: looked at again
        case = GoldenCase.model_validate({"id": f"c{i}", "question": "q?", "assert": own, "metadata": meta})
        capture = {"case_id": f"c{i}", "answer": answer, "latency_ms": latencies[i % len(latencies)]}
        capture["retrieved"] = [{"rank": 1, "rel_path": "a.md", "text": "t"}] if i % 2 else []
        if i == 6:
            capture.update(status="error", error="HTTP 502")
        pairs.append((case, Capture.model_validate(capture)))
    return pairs


def test_the_columnar_forms_give_the_rows_of_the_functions(tmp_path: Path) -> None:
    from raglake.columnar.batch import ColumnarBatch
    from raglake.pipeline.scoring import score_columnar, score_context

    metrics = [assertion_metric(name, spec(**data)) for name, data in COLUMNAR_SPECS.items()]
    metrics.append(get_metric("question_assertions"))
    assert [m.columnar is None for m in metrics] == [False] * 9 + [True, False]
    pairs = _batch_pairs()
    cases, captures = tmp_path / "cases.jsonl", tmp_path / "captures.jsonl"  # staged dumps, read in bulk
    cases.write_text("".join(c.model_dump_json() + "\n" for c, _ in pairs))
    captures.write_text("".join(x.model_dump_json() + "\n" for _, x in pairs))
    for batch in (ColumnarBatch.from_files(cases, captures, canonical=True), ColumnarBatch.from_models(pairs)):
        scored = score_columnar(batch, metrics, ScoringConfig()).scores
        got = list(zip(scored["case_id"], scored["metric"], scored["status"], scored["reason"]))
        values = scored["value"]
        expected = [
            (case.id, m.name, s.status, s.reason, s.value)
            for case, capture in pairs
            for m, s in score_context(CaseContext(case, capture, ScoringConfig()), metrics)
        ]
        assert got == [e[:4] for e in expected]
        assert [v if v == v else None for v in values] == [v if v == v else None for *_, v in expected]
    own = [(cid, status, reason) for cid, metric, status, reason in got if metric == "question_assertions"]
    assert own[:4] == [
        ("c0", "ok", "all 2 passed"),
        ("c1", "undefined", "no assertions on this question"),
        ("c2", "undefined", "no assertions on this question"),
        (
            "c3",
            "ok",
            "2 of 2 failed: assert[0] contains 'PN': not found; assert[1] latency total 120 ms; latency-below 100 ms",
        ),
    ]
    assert own[6] == ("c6", "undefined", "capture_failed")
    # a batch's cases are built as models only where a case may have assertions (c1's metadata holds the key)
    staged = ColumnarBatch.from_files(cases, captures, canonical=True)
    score_columnar(staged, [get_metric("question_assertions"), metrics[0], metrics[6]], ScoringConfig())
    assert sorted(staged._models) == [0, 1, 3]
