"""The eval file (raglake.yaml): its keys are RunSettings' fields, every problem is one error naming the file,
the line and the key (with "did you mean"), nothing lands for a bad file, and `config check`, `config schema` and
`init` work without running anything."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from raglake.cli import app
from raglake.config.evalfile import EVAL_FILE, schema
from raglake.config.front import resolve
from raglake.errors import ConfigError, InputError
from raglake.pipeline.plan import plan_run
from raglake.pipeline.settings import RunSettings
from tests.conftest import FIXTURES

GOLDEN, CAPTURES = FIXTURES / "mini_golden.jsonl", FIXTURES / "mini_captures.jsonl"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A project folder: a golden set and its captures beside where the eval file goes."""
    shutil.copy(GOLDEN, tmp_path / "golden.jsonl")
    shutil.copy(CAPTURES, tmp_path / "captures.jsonl")
    return tmp_path


GOOD = 'golden: golden.jsonl\ntargets: ["replay:captures.jsonl"]\nlake: lake\nmetrics: [mrr_at_k, recall_any_at_k]\n'
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
)
PLUGIN_BROKEN = "import raglake\n\n\nraise RuntimeError('the plugin cannot start')\n"
PLUGIN_CLASH = "import raglake\n\n\n@raglake.metric('recall_any_at_k')\ndef mine(case):\n    return 1.0\n"

# (what is wrong, the file's text, the line the error names, words the message holds); every case is one error
BAD = [
    ("unknown key", GOOD + "golen: x.jsonl\n", 5, "did you mean 'golden'"),
    ("unknown nested key", GOOD + "judge:\n  base_url: http://j/v1\n  modle: m\n", 7, "did you mean 'model'"),
    ("wrong type", GOOD + "k: ten\n", 5, "valid integer"),
    ("out of range", GOOD + "k: 0\n", 5, "greater than or equal to 1"),
    ("a string for a list", GOOD.replace('["replay:captures.jsonl"]', "replay:captures.jsonl"), 2, "valid list"),
    ("target and targets", GOOD + "target: builtin\n", 5, "not both"),
    ("unknown metric", GOOD.replace("recall_any_at_k", "recal_any_at_k"), 4, "did you mean 'recall_any_at_k'"),
    ("unknown family", GOOD + "families: [retreival]\n", 5, "did you mean 'retrieval'"),
    ("judge URL", GOOD + "judge: {base_url: 'judge:8000', model: m}\n", 5, "http(s) URL"),
    ("judge without model", GOOD + "judge: {base_url: 'http://j/v1'}\n", 5, "base_url and a model"),
    ("spot-check without judge", GOOD + "spot_check: {model: m2}\n", None, "needs a judge"),
    ("bad share", GOOD + "judge: local\nspot_check: {model: m2, share: 2}\n", 6, "less than or equal to 1"),
    ("unknown weight", GOOD + "scoring: {wp_weights: {corectness: 1}}\n", 5, "did you mean 'correctness'"),
    ("unknown scoring key", GOOD + "scoring: {theta_z: 1}\n", 5, "did you mean 'theta_s'"),
    ("unknown device", GOOD + "device: tpu\n", 5, "tpu"),
    ("unknown runner", GOOD + "runner: daks\n", 5, "daks"),
    ("gate rule metric", GOOD + "gate:\n  rules:\n    - {metric: mrr_at_kk}\n", 7, "did you mean 'mrr_at_k'"),
    ("gate negative drop", GOOD + "gate:\n  rules:\n    - {metric: mrr_at_k, max_drop: -1}\n", 7, "greater than"),
    ("duplicate key", GOOD + "k: 3\nk: 4\n", 6, "duplicate key"),
    ("not a mapping", "- golden.jsonl\n", 1, "YAML mapping"),
    ("invalid YAML", GOOD + "judge: {base_url: [\n", 6, "invalid YAML"),  # the parser finds it at the end
    ("YAML bomb", GOOD + BOMB, None, "alias"),
    ("rubric without criteria", GOOD + "rubrics:\n  polite: {inputs: [answer]}\n", 6, "criteria"),
    ("invalid regex", GOOD + "assertions:\n  cites: {type: regex, pattern: 'PN-[0-9'}\n", 6, "regex"),
    ("unknown assertion type", GOOD + "assertions:\n  cites: {type: regexp, pattern: x}\n", 6, "regex"),
    ("assertion key in a block", GOOD + "assertions:\n  cites:\n    type: regex\n    patern: x\n", 6, "pattern"),
    ("run id in a file", GOOD + "run_id: r-1\n", 5, "unknown key"),
]


@pytest.mark.parametrize(("what", "text", "line", "words"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_eval_file_is_one_error_naming_file_line_and_key(folder, what, text, line, words) -> None:
    path = folder / EVAL_FILE
    path.write_text(text, encoding="utf-8")
    with pytest.raises((InputError, ConfigError)) as err:
        for settings in resolve(path).runs:
            plan_run(settings)
    message = str(err.value)
    assert words.lower() in message.lower(), message
    if line is not None:
        assert isinstance(err.value, InputError) and err.value.path == str(path) and err.value.line == line, message
    assert "\n" not in message.strip() and "Traceback" not in message


@pytest.mark.parametrize(
    ("what", "files", "words"),
    [
        ("missing golden file", {EVAL_FILE: GOOD.replace("golden: golden.jsonl", "golden: nope.jsonl")}, "nope"),
        ("missing replay file", {EVAL_FILE: GOOD.replace("replay:captures.jsonl", "replay:none.jsonl")}, "none"),
        ("plugin that fails", {EVAL_FILE: GOOD + "plugins: [checks.py]\n", "checks.py": PLUGIN_BROKEN}, "checks.py"),
        ("plugin shadowing a built-in", {EVAL_FILE: GOOD + "plugins: [c.py]\n", "c.py": PLUGIN_CLASH}, "built-in"),
        ("missing plugin", {EVAL_FILE: GOOD + "plugins: [gone.py]\n"}, "gone.py"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_bad_inputs_the_file_names_stop_the_run_before_anything_lands(folder, what, files, words) -> None:
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "-c", str(folder / EVAL_FILE), "--quiet"])
    assert result.exit_code != 0
    message = str(result.exception) if not isinstance(result.exception, SystemExit) else result.output
    assert words in message, message
    assert not (folder / "lake").exists()  # nothing landed, not even an empty lake


def test_the_issue_shape_resolves_to_settings_by_field_name(folder) -> None:
    (folder / EVAL_FILE).write_text(
        GOOD + "k: 3\njudge: {base_url: 'http://127.0.0.1:8011/v1', model: gpt-4o-mini}\n", encoding="utf-8"
    )
    (run,) = resolve(folder / EVAL_FILE).runs
    assert run.golden == str(folder / "golden.jsonl") and run.target == f"replay:{folder / 'captures.jsonl'}"
    assert run.lake == str(folder / "lake") and run.k == 3 and run.metrics == ["mrr_at_k", "recall_any_at_k"]
    assert (run.judge.base_url, run.judge.model, run.judge.concurrency) == (
        "http://127.0.0.1:8011/v1",
        "gpt-4o-mini",
        8,
    )
    assert run.config_file == str(folder / EVAL_FILE) and len(run.config_sha256) == 64


def test_every_option_overrides_its_field_and_nothing_else(folder) -> None:
    (folder / EVAL_FILE).write_text(
        GOOD + "k: 3\njudge: {base_url: 'http://j/v1', model: m, concurrency: 2}\n", encoding="utf-8"
    )
    (run,) = resolve(folder / EVAL_FILE, {"k": 7, "judge.model": "other", "theta_s": 0.6}).runs
    assert (run.k, run.judge.model, run.judge.concurrency, run.scoring.theta_s) == (7, "other", 2, 0.6)
    with pytest.raises(ConfigError, match="did you mean 'judge_model'"):
        resolve(folder / EVAL_FILE, {"judge_modle": "x"})
    result = CliRunner().invoke(app, ["config", "check", "-c", str(folder / EVAL_FILE)])
    assert result.exit_code == 0, result.output
    assert "ok (1 target(s))" in " ".join(result.output.split())


def test_a_run_records_the_file_it_came_from_and_every_resolved_setting(folder, prefect_harness) -> None:
    path = folder / EVAL_FILE
    path.write_text(GOOD, encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "-c", str(path), "--quiet", "--k", "4"])
    assert result.exit_code == 0, result.output
    (row,) = duckdb.sql(
        f"SELECT eval_file, eval_file_sha256, k, config_json FROM read_parquet('{folder}/lake/runs/**/*.parquet')"
    ).fetchall()

    assert row[0] == str(path) and row[1] == hashlib.sha256(path.read_bytes()).hexdigest() and row[2] == 4
    settings = json.loads(row[3])["settings"]
    assert settings["k"] == 4 and settings["metrics"] == ["mrr_at_k", "recall_any_at_k"]
    assert RunSettings.model_validate({**settings, "run_id": None}).k == 4  # the record reads back as settings


def test_schema_is_valid_json_schema_and_describes_every_key(folder) -> None:
    out = schema()
    jsonschema.Draft202012Validator.check_schema(out)
    props = out["properties"]
    assert {"golden", "targets", "metrics", "judge", "plugins", "rubrics", "assertions", "gate"} <= set(props)
    assert all(props[k].get("description") for k in ("golden", "targets", "k", "lake", "metrics"))
    good = yaml.safe_load(GOOD)
    jsonschema.validate(good, out)  # an editor accepts a valid file
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "golen": "x"}, out)  # and flags an unknown key
    result = CliRunner().invoke(app, ["config", "schema"])
    assert result.exit_code == 0 and json.loads(result.output)["title"].startswith("raglake eval file")


def test_init_writes_a_starter_file_that_checks_and_never_replaces_one(folder) -> None:
    shutil.copy(folder / "captures.jsonl", folder / "golden.captures.jsonl")
    result = CliRunner().invoke(app, ["init", str(folder / "golden.jsonl")])
    assert result.exit_code == 0, result.output
    text = (folder / EVAL_FILE).read_text()
    assert "golden: 'golden.jsonl'" in text and "replay:golden.captures.jsonl" in text and "# judge:" in text
    (run,) = resolve(folder / EVAL_FILE).runs
    assert plan_run(run).golden.cases  # the starter file runs as written
    again = CliRunner().invoke(app, ["init", str(folder / "golden.jsonl")])
    assert again.exit_code != 0 and "exists already" in str(again.exception)


def test_init_on_a_file_that_holds_answers_makes_it_its_own_replay_target(tmp_path) -> None:
    """Before, the starter named the builtin RAG over the sample corpus: the file's answers were never evaluated."""
    rows = [{"user_input": "Who wrote it?", "response": "Ann.", "retrieved_contexts": ["Ann wrote it."]}]
    (tmp_path / "ragas.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["init", str(tmp_path / "ragas.jsonl")])
    assert result.exit_code == 0, result.output
    evaluation = resolve(tmp_path / EVAL_FILE)
    assert [r.target for r in evaluation.runs] == [f"replay:{tmp_path / 'ragas.jsonl'}"] and evaluation.notes == []
    elsewhere = tmp_path / "out" / "raglake.yaml"  # -o in another folder: the paths are the eval file's own
    elsewhere.parent.mkdir()
    assert CliRunner().invoke(app, ["init", str(tmp_path / "ragas.jsonl"), "-o", str(elsewhere)]).exit_code == 0
    (run,) = resolve(elsewhere).runs
    assert run.golden == str(tmp_path / "ragas.jsonl") and run.target == f"replay:{tmp_path / 'ragas.jsonl'}"
    assert plan_run(run).golden.cases


def test_init_elsewhere_names_the_captures_beside_the_golden_set_from_there(folder, tmp_path) -> None:
    shutil.copy(folder / "captures.jsonl", folder / "golden.captures.jsonl")
    elsewhere = tmp_path / "configs" / "raglake.yaml"
    elsewhere.parent.mkdir()
    done = CliRunner().invoke(app, ["init", str(folder / "golden.jsonl"), "-o", str(elsewhere)])
    assert done.exit_code == 0, done.output
    (run,) = resolve(elsewhere).runs
    assert run.target == f"replay:{folder / 'golden.captures.jsonl'}" and plan_run(run).golden.cases


def test_slices_of_the_eval_file_are_dimensions_of_breakdowns_and_comparisons(folder, prefect_harness) -> None:
    """`slices: [language]`: every case's metadata value is its slice of the dimension meta.language."""
    cases = [json.loads(line) for line in (folder / "golden.jsonl").read_text().splitlines() if line.strip()]
    for i, case in enumerate(cases):
        case["metadata"] = {**case.get("metadata", {}), **({"language": "de"} if i % 2 else {})}
    (folder / "golden.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (folder / EVAL_FILE).write_text(GOOD + "slices: [language]\n", encoding="utf-8")
    for _ in range(2):
        result = CliRunner().invoke(app, ["run", "-c", str(folder / EVAL_FILE), "--quiet"])
        assert result.exit_code == 0, result.output
    from raglake.pipeline.lakes import open_lake

    q = open_lake(folder / "lake")
    run_id = q.run_ids(["latest"])[0]
    rows = [r for r in q.breakdown([run_id], "meta.language") if r["metric"] == "mrr_at_k"]
    assert sorted((r["slice"], r["n_rows"]) for r in rows) == [("(none)", 2), ("de", 2)]
    compared = q.compare(q.run_ids(["latest~1"])[0], run_id)
    assert {r["slice"] for r in compared if r["dimension"] == "meta.language"} == {"(none)", "de"}
    with pytest.raises(ConfigError, match="meta.KEY"):
        q.breakdown([run_id], "meta.bad key")
    (folder / EVAL_FILE).write_text(GOOD + "slices: ['bad key']\n", encoding="utf-8")
    with pytest.raises(InputError, match="slice key 'bad key'"):
        resolve(folder / EVAL_FILE)


def test_a_metric_at_its_own_settings_lands_beside_the_runs_own(folder, prefect_harness) -> None:
    """`{name: recall_any_at_k, k: 1}` (= recall_any_at_k@k=1) beside recall_any_at_k at the run's k = 3. By hand
    from the fixture: c1's gold section (Atlas > Database) is retrieved at rank 2, c2's (Atlas > Blockers > Auth)
    at rank 1; c3 is unanswerable and c4's capture failed. So recall at 3 is 2/2 and at 1 is 1/2."""
    text = GOOD.replace("[mrr_at_k, recall_any_at_k]", "[recall_any_at_k, {name: recall_any_at_k, k: 1}]")
    (folder / EVAL_FILE).write_text(text + "k: 3\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["run", "-c", str(folder / EVAL_FILE), "--quiet"])
    assert result.exit_code == 0, result.output
    rows = duckdb.sql(
        f"SELECT metric, metric_version, avg(value) FILTER (WHERE status = 'ok') FROM "
        f"read_parquet('{folder}/lake/scores/**/*.parquet', hive_partitioning=false) GROUP BY ALL ORDER BY 1"
    ).fetchall()
    from raglake.metrics.registry import get_metric

    version = get_metric("recall_any_at_k").version
    assert rows == [("recall_any_at_k", version, 1.0), ("recall_any_at_k@k=1", f"{version}+k=1", 0.5)]
    for bad, words in (("ndcg_at_k@theta_s=0.5", "does not change"), ("faithfulness@k=2", "judge metric")):
        with pytest.raises(ConfigError, match=words):
            resolve(folder / EVAL_FILE, {"metrics": [bad]})


def test_every_file_only_key_is_taken_and_recorded(folder) -> None:
    """`name:` and `description:` were in the schema but made every run fail ('unknown setting')."""
    text = GOOD + "name: nightly\ndescription: the sample's eval\nfamilies: [retrieval]\nslices: [lang]\n"
    (folder / EVAL_FILE).write_text(text + "gate: {rules: [{metric: mrr_at_k}]}\n", encoding="utf-8")
    evaluation = resolve(folder / EVAL_FILE)
    (run,) = evaluation.runs
    assert run.about == {"name": "nightly", "description": "the sample's eval"} and run.slices == ["lang"]
    assert evaluation.gate is not None and plan_run(run).golden.cases


@pytest.mark.parametrize(
    ("file_judge", "overrides", "expected"),
    [
        ("local", {"judge.concurrency": 2}, {"local": True, "concurrency": 2}),
        ("local", {"judge.base_url": "http://j/v1", "judge.model": "m"}, {"local": False, "base_url": "http://j/v1"}),
        ("{base_url: 'http://j/v1', model: m}", {"judge.local": True}, {"local": True, "base_url": None}),
        ("{base_url: 'http://j/v1', model: m}", {"judge.timeout_s": 5}, {"model": "m", "timeout_s": 5}),
        (
            "{base_url: 'http://j/v1', model: m}",
            {"judge": {"base_url": "http://k/v1", "model": "n"}, "judge_timeout_s": 5},
            {"base_url": "http://k/v1", "model": "n", "timeout_s": 5},
        ),
    ],
)
def test_judge_options_merge_over_the_files_judge(folder, file_judge, overrides, expected) -> None:
    (folder / EVAL_FILE).write_text(GOOD + f"judge: {file_judge}\n", encoding="utf-8")
    (run,) = resolve(folder / EVAL_FILE, overrides).runs
    assert {k: getattr(run.judge, k) for k in expected} == expected


def test_metrics_given_as_an_option_are_the_only_ones_the_files_families_add_none(folder) -> None:
    (folder / EVAL_FILE).write_text(GOOD + "families: [retrieval]\n", encoding="utf-8")
    assert resolve(folder / EVAL_FILE, {"metrics": ["mrr_at_k"]}).runs[0].metrics == ["mrr_at_k"]
    assert len(resolve(folder / EVAL_FILE).runs[0].metrics) > 2  # without the option: the families join


def test_another_eval_files_metrics_are_never_this_runs(folder, tmp_path) -> None:
    """One process, two eval files: B may not compute A's plugin metric by naming it, and A's assertion and B's
    rubric may share a name (B's replaces A's)."""
    a, b = folder, tmp_path / "b"
    b.mkdir()
    for name in ("golden.jsonl", "captures.jsonl"):
        shutil.copy(a / name, b / name)
    (a / "checks.py").write_text("import raglake\n\n\n@raglake.metric('short_answer')\ndef f(case):\n    return 1.0\n")
    (a / EVAL_FILE).write_text(GOOD + "plugins: [checks.py]\nassertions: {cites_pn: {type: regex, pattern: x}}\n")
    resolve(a / EVAL_FILE)
    (b / EVAL_FILE).write_text(GOOD.replace("recall_any_at_k", "short_answer"))
    with pytest.raises(InputError, match="belongs to the eval file"):
        resolve(b / EVAL_FILE)
    rubric = "rubrics: {cites_pn: {criteria: 'Does it cite the policy?'}}\n"
    (b / EVAL_FILE).write_text(GOOD + rubric)
    resolve(b / EVAL_FILE)
    from raglake.metrics.registry import get_metric

    assert get_metric("cites_pn").origin == "rubric"  # B's rubric replaced A's assertion, no clash
    (b / EVAL_FILE).write_text(GOOD + rubric + "assertions: {cites_pn: {type: regex, pattern: x}}\n")
    with pytest.raises(ConfigError, match="defined twice"):
        resolve(b / EVAL_FILE)


def test_a_metric_looking_deeper_than_the_runs_k_is_refused(folder) -> None:
    (folder / EVAL_FILE).write_text(GOOD + "k: 3\n", encoding="utf-8")
    (run,) = resolve(folder / EVAL_FILE, {"metrics": ["precision_at_k@k=10"]}).runs
    with pytest.raises(ConfigError, match="looks deeper than the run's k = 3"):
        plan_run(run)


def test_config_of_the_wrong_type_is_one_error(folder) -> None:
    for bad in (123, ["a.yaml"]):
        with pytest.raises(ConfigError, match="config takes an eval file's path or its content as a mapping"):
            resolve(bad)
