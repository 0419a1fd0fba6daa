"""A user's own metrics in Python (`@raglake.metric`, raglake.metrics.define / custom / plugins): metadata
refused where the decorator is written, what a function may return and how it lands, an exception as that
case's `metric_error` (never the run), a version that follows the code, plugin files loaded, loaded again
and failing to load, pickling by value for Dask workers, no shadowing a built-in, the docs table of
built-ins only, and `raglake metrics [--check] --plugin FILE`."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import raglake
from raglake.docs import metrics_markdown
from raglake.errors import ConfigError
from raglake.metrics import plugins, registry
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.custom import Case, UserFunction
from raglake.metrics.plugins import load_plugins, module_name
from raglake.metrics.registry import Score, get_metric
from raglake.schemas import Capture, GoldenCase
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Each test registers into a copy of the registry (and forgets the plugin files it loaded)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(plugins, "_FILES", {})
    monkeypatch.setattr(plugins, "_MODULES", {})


def plugin(folder: Path, text: str, name: str = "checks.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


def context(answer: str = "Atlas uses Postgres 16.", k: int = 5, **case: object) -> CaseContext:
    golden = GoldenCase.model_validate({"id": "c1", "question": "Which database?", **case})
    capture = Capture.model_validate(
        {
            "case_id": "c1",
            "answer": answer,
            "retrieved": [
                {"rank": 2, "rel_path": "b.md", "heading_path": "B > Two", "text": "second"},
                {"rank": 1, "rel_path": "a.md", "text": "first", "score": 0.9},
                {"rank": 7, "rel_path": "c.md", "text": "beyond k"},
            ],
            "latency_ms": {"retrieval": 20, "total": 330},
        }
    )
    return CaseContext(golden, capture, ScoringConfig(k=k))


SHORT = textwrap.dedent(
    """
    import raglake

    @raglake.metric("short_answer", version="1", higher_is_better=True)
    def short_answer(case):
        return None if case.answer is None else float(len(case.answer) <= 400)
    """
).lstrip()


# ---- the decorator ------------------------------------------------------------------------------------


def test_the_issues_example_registers_a_versioned_case_metric_of_the_plugin(tmp_path):
    plugin(tmp_path, SHORT)
    assert load_plugins(["checks.py"], str(tmp_path), str(tmp_path / "raglake.yaml")) == ["short_answer"]
    m = get_metric("short_answer")
    assert (m.family, m.level, m.origin, m.source, m.scale) == ("custom", "case", "plugin", "checks.py:3", "0-1")
    assert m.version.startswith("1+") and len(m.version) == len("1+") + 8
    assert m.fn(context()) == Score.ok(1.0)
    assert m.fn(context(answer="  ")).reason == "the metric returned None"
    assert m.as_row()["origin"] == "plugin"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"name": "Short-Answer"}, "metric name 'Short-Answer': use 1 to 64 lowercase letters"),
        ({"name": "1st"}, "a letter first"),
        ({"name": "x" * 65}, "1 to 64"),
        ({"version": ""}, "version '' of metric 'm'"),
        ({"version": "1 2"}, "a short word"),
        ({"family": "retreival"}, "unknown family of metric 'm' 'retreival' (did you mean 'retrieval'?)"),
        ({"applies_to": "answerables"}, "did you mean 'answerable'?"),
        ({"inputs": ("answers",)}, "unknown input of metric 'm' 'answers' (did you mean 'answer'?)"),
        ({"inputs": ("answer", "vectors")}, "unknown input of metric 'm' 'vectors'"),
        ({"scale": "percent"}, "scale 'percent' of metric 'm': use '0-1', 'binary'"),
        ({"scale": "5-1"}, "scale '5-1'"),
        ({"higher_is_better": "yes"}, "higher_is_better of metric 'm' is True, False or None"),
        ({"higher_is_better": 1}, "higher_is_better of metric 'm' is True, False or None, not 1"),
        ({"inputs": None}, "inputs of metric 'm' is a list of names (of question, answer, contexts"),
        ({"description": 3}, "description of metric 'm' is a string"),
    ],
)
def test_bad_metadata_is_refused_where_the_decorator_is_written(kwargs, words):
    args = {"name": "m", **kwargs}
    with pytest.raises(ConfigError) as e:
        raglake.metric(args.pop("name"), **args)
    assert words in str(e.value)


def test_the_function_takes_the_case_and_nothing_else():
    with pytest.raises(ConfigError, match=r"must take one argument, the case"):
        raglake.metric("two")(lambda case, other: 1)
    with pytest.raises(ConfigError, match="plain function"):

        @raglake.metric("later")
        async def later(case):
            return 1

    with pytest.raises(ConfigError, match="decorates a function"):
        raglake.metric("obj")(object())
    with pytest.raises(ConfigError, match=r"takes the metric's name first: @raglake.metric\("):

        @raglake.metric
        def unnamed(case):
            return 1

    assert "two" not in {m.name for m in registry.all_metrics()}


def test_a_metrics_inputs_make_a_case_that_lacks_one_undefined_without_a_call():
    calls = []

    def spy(case):
        calls.append(case.id)
        return 1.0

    cases = [
        (("answer",), context(answer=""), "no answer"),
        (("contexts",), _no_contexts(), "no contexts"),
        (("reference",), context(), "no reference answer"),
        (("metadata",), context(), "no metadata"),
        (("cost",), context(), "no cost"),
    ]
    for inputs, ctx, reason in cases:
        assert UserFunction(spy, inputs, "0-1")(ctx) == Score.undefined(reason)
    assert calls == []
    ok = context(reference_answer="Postgres 16.", metadata={"lang": "en"})
    assert (
        UserFunction(spy, ("question", "answer", "contexts", "reference", "metadata", "latency"), "0-1")(ok).value == 1
    )


def _no_contexts() -> CaseContext:
    ctx = context()
    capture = ctx.capture.model_copy(update={"retrieved": []})
    return CaseContext(ctx.case, capture, ctx.config)


def test_the_case_is_read_only_and_holds_the_top_k_contexts_in_rank_order():
    case = Case(context(k=2, tags=["db", "atlas"], metadata={"lang": "en", "owners": ["ana"]}, category="factual"))
    assert case.contexts == ("first", "second")  # ranks 1 and 2; rank 7 lies beyond k
    assert [c.rank for c in case.retrieved] == [1, 2] and case.retrieved[1].heading == "B > Two"
    assert (case.id, case.question, case.answer, case.reference) == (
        "c1",
        "Which database?",
        "Atlas uses Postgres 16.",
        None,
    )
    assert (case.category, case.tags, case.answerable, case.k) == ("factual", ("db", "atlas"), True, 2)
    assert (case.latency_ms, dict(case.latency), case.cost_usd) == (330, {"retrieval": 20, "total": 330}, None)
    assert case.metadata["owners"] == ("ana",)
    with pytest.raises(AttributeError, match="read-only"):
        case.answer = "changed"
    with pytest.raises(TypeError):
        case.metadata["lang"] = "de"
    assert Case(context(answer="   ")).answer is None


# ---- what a metric returns ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returned", "scale", "expected"),
    [
        (True, "0-1", ("ok", 1.0, None)),
        (False, "binary", ("ok", 0.0, None)),
        (0.25, "0-1", ("ok", 0.25, None)),
        (3, "1-5", ("ok", 3.0, None)),
        (np.float32(0.5), "0-1", ("ok", 0.5, None)),
        (np.bool_(True), "binary", ("ok", 1.0, None)),
        (1234.5, "ms", ("ok", 1234.5, None)),
        (-7.0, "number", ("ok", -7.0, None)),
        ((0.75, "two of four"), "0-1", ("ok", 0.75, "two of four")),
        (None, "0-1", ("undefined", None, "the metric returned None")),
        ((None, "no language tag"), "0-1", ("undefined", None, "no language tag")),
        (Score.ok(0.5, reason="why"), "0-1", ("ok", 0.5, "why")),
        (Score.undefined("not mine"), "0-1", ("undefined", None, "not mine")),
        (Score(5.0, "skipped"), "0-1", ("skipped", None, "skipped")),  # a non-ok status carries NaN and a reason
        (math.nan, "0-1", ("metric_error", None, "returned nan; a metric returns a finite number (None: undefined)")),
        (math.inf, "number", ("metric_error", None, "returned inf; a metric returns a finite number")),
        ("0.5", "0-1", ("metric_error", None, "returned str '0.5'; a metric returns a number, a bool, None")),
        ([1], "0-1", ("metric_error", None, "returned list [1]")),
        ((1, 2, 3), "0-1", ("metric_error", None, "returned the tuple (1, 2, 3); a tuple is (value, reason)")),
        ((1, 2), "0-1", ("metric_error", None, "returned the tuple (1, 2); a tuple is (value, reason)")),
        (1.5, "0-1", ("metric_error", None, "returned 1.5, outside its scale 0-1")),
        (0.5, "binary", ("metric_error", None, "returned 0.5, outside its scale binary")),
        (Score(2.0, "ok"), "0-1", ("metric_error", None, "returned 2, outside its scale 0-1")),
        (Score(math.nan, "bogus", "x"), "0-1", ("metric_error", None, "returned a Score of status 'bogus'")),
    ],
)
def test_what_a_metric_returns_becomes_a_score(returned, scale, expected):
    s = UserFunction(lambda case: returned, (), scale)(context())
    status, value, reason = expected
    assert s.status == status
    assert s.value == value if value is not None else math.isnan(s.value)
    assert s.reason == reason if status != "metric_error" else s.reason.startswith(reason), s.reason


def test_an_exception_is_that_cases_metric_error_with_its_type_and_message():
    def fails(case):
        return {"a": 1}[case.metadata.get("key", "missing")]

    s = UserFunction(fails, (), "0-1")(context())
    assert (s.status, math.isnan(s.value)) == ("metric_error", True)
    assert s.reason.startswith("KeyError: 'missing' (at test_user_metrics.py:")
    s = UserFunction(lambda case: 1 / 0, (), "0-1")(context())
    assert s.reason.startswith("ZeroDivisionError: division by zero")
    with pytest.raises(KeyboardInterrupt):  # not an error of the case: the user stops the run
        UserFunction(_interrupt, (), "0-1")(context())


def _interrupt(case):
    raise KeyboardInterrupt


# ---- the version follows the code ---------------------------------------------------------------------


VERSIONED = """
    import raglake

    LIMIT = {limit}


    def words(text):
        return len(text.split()){helper}


    @raglake.metric("brief", version="3")
    def brief(case):
        return float(words(case.answer or "") <= LIMIT)


    @raglake.metric("polite")
    def polite(case):
        return float("please" in (case.answer or "").lower()){polite}
"""


def _versions(tmp_path: Path, limit: int = 40, helper: str = "", polite: str = "") -> dict[str, str]:
    plugin(tmp_path, VERSIONED.format(limit=limit, helper=helper, polite=polite))
    load_plugins(["checks.py"], str(tmp_path))
    return {n: get_metric(n).version for n in ("brief", "polite")}


def test_a_metrics_version_changes_with_its_code_and_only_its_own(tmp_path):
    first = _versions(tmp_path)
    assert first["brief"].startswith("3+") and first["polite"].startswith("1+")
    assert _versions(tmp_path) == first  # the same code: the same versions
    other = _versions(tmp_path, polite="  # a comment")
    assert other["brief"] == first["brief"] and other["polite"] != first["polite"]
    limit = _versions(tmp_path, limit=50)  # a constant the metric reads
    assert limit["brief"] != first["brief"] and limit["polite"] == first["polite"]
    helper = _versions(tmp_path, helper=" + 0")  # a function the metric calls
    assert helper["brief"] != first["brief"] and helper["polite"] == first["polite"]


DATA = """
import re

import raglake

POLICY = re.compile({pattern!r})
WORDS = {words!r}


@raglake.metric("cites_policy")
def cites_policy(case):
    return bool(POLICY.search(case.answer or "")) and any(w in (case.answer or "") for w in WORDS)
"""


def test_a_metrics_version_follows_the_patterns_and_word_lists_it_reads(tmp_path):
    def version(pattern: str = "PN-[0-9]{4}", words: object = ("policy",)) -> str:
        plugin(tmp_path, DATA.format(pattern=pattern, words=words))
        load_plugins(["checks.py"], str(tmp_path))
        return get_metric("cites_policy").version

    first = version()
    assert version() == first
    assert version(pattern="PN-[0-9]{5}") != first
    assert version(words=("policy", "rule")) != first
    assert version(words={"policy"}) == version(words={"policy"}) != first
    assert version(words={"policy": 1}) != version(words={"policy": 2})


def test_a_metrics_version_is_the_same_in_every_process(tmp_path):
    """rescore runs in another process than the run it compares with: the hash may not depend on the
    process (set order under hash randomization, addresses)."""
    plugin(tmp_path, DATA.format(pattern="PN-[0-9]{4}", words={"policy", "rule", "clause", "section"}))
    load_plugins(["checks.py"], str(tmp_path))
    code = (
        "import sys; from raglake.metrics.plugins import load_plugins; from raglake.metrics.registry import get_metric;"
        "load_plugins(['checks.py'], sys.argv[1]); print(get_metric('cites_policy').version)"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert seen == {get_metric("cites_policy").version}


# ---- loading plugin files -----------------------------------------------------------------------------


def test_loading_a_file_again_replaces_its_metrics_and_the_same_content_is_not_run_again(tmp_path):
    path = plugin(tmp_path, SHORT + '\n\n@raglake.metric("gone")\ndef gone(case):\n    return 1\n')
    assert load_plugins([str(path)], "/") == ["short_answer", "gone"]  # an absolute path
    first = get_metric("short_answer")
    assert load_plugins(["checks.py"], str(tmp_path)) == ["short_answer", "gone"]
    assert get_metric("short_answer") is first  # same bytes: the module is not run again
    plugin(tmp_path, SHORT.replace("400", "300"))
    assert load_plugins(["checks.py"], str(tmp_path)) == ["short_answer"]
    assert get_metric("short_answer").version != first.version
    assert "gone" not in {m.name for m in registry.all_metrics()}
    assert module_name(path) == module_name(path.resolve()) and module_name(path) in sys.modules


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("import raglake\nX = 1\nY = X / 0\n", "checks.py:3 (Y = X / 0): ZeroDivisionError: division by zero"),
        ("import raglake\ndef f(case:\n    return 1\n", "checks.py:2: SyntaxError:"),
        ("import raglake_typo\n", "checks.py:1 (import raglake_typo): ModuleNotFoundError: No module named"),
        ("import raglake\n", "defines no metric: decorate a function of the case with @raglake.metric(name)"),
        (
            "import raglake\n\n@raglake.metric('lang_ok', family='customs')\ndef f(case):\n    return 1\n",
            "checks.py:3 (@raglake.metric('lang_ok', family='customs')): unknown family of metric 'lang_ok' "
            "'customs' (did you mean 'custom'?)",
        ),
        (
            "import raglake\n\n@raglake.metric('mrr_at_k')\ndef f(case):\n    return 1\n",
            "metric 'mrr_at_k' (checks.py:3) has the name of a built-in metric; a user's metric may not shadow one",
        ),
        (
            "import raglake\n@raglake.metric('a')\ndef f(case):\n    return 1\n@raglake.metric('a')\ndef g(case):\n"
            "    return 1\n",
            "metric 'a' is defined twice in checks.py: at checks.py:2 and at checks.py:5; rename one",
        ),
    ],
)
def test_a_plugin_that_fails_to_import_is_one_error_naming_file_line_exception_and_eval_file(tmp_path, text, words):
    before = {m.name: m for m in registry.all_metrics()}
    plugin(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_plugins(["checks.py"], str(tmp_path), "/work/team/raglake.yaml")
    message = str(e.value)
    assert message.startswith("plugin checks.py (named in /work/team/raglake.yaml)"), message
    assert words in message, message
    assert "\n" not in message
    assert {m.name: m for m in registry.all_metrics()} == before  # nothing of it stays registered


def test_a_plugin_failing_after_a_metric_leaves_the_earlier_definition_in_place(tmp_path):
    plugin(tmp_path, SHORT)
    load_plugins(["checks.py"], str(tmp_path))
    good = get_metric("short_answer")
    plugin(tmp_path, SHORT.replace("400", "10") + "\nraise RuntimeError('half way')\n")
    with pytest.raises(ConfigError, match=r"checks.py:7 \(raise RuntimeError\('half way'\)\): RuntimeError: half way"):
        load_plugins(["checks.py"], str(tmp_path))
    assert get_metric("short_answer") is good


def test_plugins_that_are_not_there_or_clash_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"plugin nope.py \(named in e.yaml\): no such file .*nope.py"):
        load_plugins(["nope.py"], str(tmp_path), "e.yaml")
    with pytest.raises(ConfigError, match=r"plugin no_such_module: no file no_such_module in .* and no module"):
        load_plugins(["no_such_module"], str(tmp_path))
    with pytest.raises(ConfigError, match="a plugin is a .py file or an importable module name"):
        load_plugins(["not a module"], str(tmp_path))
    plugin(tmp_path, SHORT, "a.py")
    plugin(tmp_path, SHORT, "b.py")
    with pytest.raises(ConfigError, match=r"metric 'short_answer' is defined twice: by a.py:3 and by b.py:3; rename"):
        load_plugins(["a.py", "b.py"], str(tmp_path))


def test_a_user_metric_may_not_take_a_builtin_name():
    with pytest.raises(ConfigError, match="'recall_any_at_k' .* has the name of a built-in metric"):

        @raglake.metric("recall_any_at_k")
        def mine(case):
            return 1

    assert get_metric("recall_any_at_k").builtin


def test_a_plugin_named_as_a_module_is_imported_once(tmp_path, monkeypatch):
    plugin(tmp_path, SHORT, "team_checks.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "team_checks", raising=False)
    assert load_plugins(["team_checks"], ".") == ["short_answer"]
    assert get_metric("short_answer").source == "team_checks.py:3"
    assert load_plugins(["team_checks"], ".") == ["short_answer"]


# ---- pickling by value --------------------------------------------------------------------------------


PICKLED = """
import math, pickle, sys
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.schemas import Capture, GoldenCase

metric = pickle.loads(open(sys.argv[1], "rb").read())
case = GoldenCase(id="c1", question="q?")
for answer in ("short", "x" * 500):
    s = metric.fn(CaseContext(case, Capture(case_id="c1", answer=answer), ScoringConfig()))
    print(metric.name, metric.version, s.status, s.value)
print(sorted(m for m in sys.modules if m.startswith("_raglake_plugin")))
"""


def test_a_plugin_metric_pickles_by_value_for_a_worker_that_never_imported_it(tmp_path):
    import cloudpickle

    path = plugin(tmp_path, SHORT + "\n\ndef helper():\n    return 400\n")
    load_plugins(["checks.py"], str(tmp_path))
    m = get_metric("short_answer")
    blob = tmp_path / "metric.pkl"
    blob.write_bytes(cloudpickle.dumps(m))
    path.unlink()  # the worker cannot import the file: it gets the code with the metric
    script = tmp_path / "worker.py"
    script.write_text(PICKLED)
    done = subprocess.run([sys.executable, str(script), str(blob)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"short_answer {m.version} ok 1.0",
        f"short_answer {m.version} ok 0.0",
        "[]",
    ]


# ---- the docs table and the command line --------------------------------------------------------------


def test_the_docs_table_lists_builtin_metrics_only(tmp_path):
    plugin(tmp_path, SHORT)
    load_plugins(["checks.py"], str(tmp_path))
    text = metrics_markdown()
    assert "short_answer" not in text and "`recall_any_at_k`" in text
    assert text.strip() == (ROOT / "docs" / "metric-table.md").read_text(encoding="utf-8").strip()


CHECKED = """
    import raglake

    @raglake.metric("short_answer")
    def short_answer(case):
        return None if case.answer is None else float(len(case.answer) <= 400)

    @raglake.metric("answer_words", scale="count", higher_is_better=None)
    def answer_words(case):
        return len(case.answer.split())

    @raglake.metric("lang_ok", inputs=("metadata",))
    def lang_ok(case):
        return case.metadata.get("lang") == "en"
"""


def _cli(tmp_path: Path, *args: str):
    from raglake.cli import app

    return CliRunner().invoke(app, ["metrics", *args], env={"COLUMNS": "250"})


def test_metrics_check_runs_the_conformance_checks_on_the_users_metrics(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plugin(tmp_path, CHECKED)
    result = _cli(tmp_path, "--check", "--plugin", "checks.py")
    lines = result.output.splitlines()
    assert result.exit_code == 1, result.output
    assert [line.split()[:2] for line in lines] == [
        ["ok", "short_answer"],
        ["FAIL", "answer_words"],
        ["ok", "lang_ok"],
    ]
    assert "plugin checks.py:3" in lines[0]
    # an empty answer has no words: None is the metric's own way to say so; raising is a failure
    assert "on case e1 (k=1): raised or returned what is not a value: AttributeError:" in lines[1]
    assert "(note: never defined (ok) on the check's cases)" in lines[2]  # it reads metadata the cases lack

    plugin(tmp_path, CHECKED.replace("len(case.answer.split())", "len((case.answer or '').split())"))
    result = _cli(tmp_path, "--check", "--plugin", "checks.py")
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == ["ok", "ok", "ok"]


def test_metrics_lists_the_users_metrics_with_their_origin_and_check_without_any_says_so(tmp_path, monkeypatch):
    from raglake.cli import render

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(render.console, "width", 400)  # one line a metric
    plugin(tmp_path, SHORT)
    result = _cli(tmp_path, "--plugin", "checks.py")
    assert result.exit_code == 0, result.output
    [row] = [line for line in result.output.splitlines() if "short_answer" in line]
    assert "custom" in row and "plugin" in row and "checks.py:3" in row
    result = _cli(tmp_path, "--markdown", "--plugin", "checks.py")  # after the built-in table (test_metrics_markdown)
    assert "short_answer" in result.output.split("## Your metrics")[1]
    monkeypatch.setattr(registry, "_REGISTRY", {n: m for n, m in registry._REGISTRY.items() if m.builtin})
    result = _cli(tmp_path, "--check")
    assert result.exit_code == 1 and "no metric of your own to check" in result.output


def test_import_raglake_stays_light_and_offers_the_decorator():
    code = (
        "import sys, raglake\n"
        "assert 'metric' in dir(raglake) and 'raglake.metrics' not in sys.modules\n"
        "raglake.metric\n"
        "print(sorted(m for m in ('prefect', 'pandas') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
