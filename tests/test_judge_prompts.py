"""Judge prompts are files: every bundled one loads and matches its file; rendering fails on a missing
variable; a bad prompt file (undeclared placeholder, bad output schema, id not matching the file name,
unknown key) fails with file, line and field; the prompt lock holds each file's content hash with its
version (variants included) and the code-side rendering, and catches an edit of either without a
version bump."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raglake.errors import ConfigError, InputError
from raglake.judge.prompts import (
    LOCK_COMMAND,
    RENDERING,
    get_prompt,
    get_variant,
    load_prompt_file,
    load_prompts,
    lock_problems,
    main,
    rendering_hash,
    write_lock,
)


def test_every_bundled_prompt_loads_and_matches_its_file():
    prompts = load_prompts()
    assert len(prompts) >= 17
    for pid, p in prompts.items():
        assert p.id == pid and p.version >= 1 and p.output_schema["type"] == "object"


def test_rendering_with_a_missing_variable_raises():
    prompt = get_prompt("groundedness")
    with pytest.raises(ConfigError, match="needs variable.*contexts"):
        prompt.render({"answer": "a"})
    with pytest.raises(ConfigError, match="contexts"):
        prompt.render({"answer": "a", "contexts": None})  # None is missing, never the text "None"


PROMPT = """\
id: {id}
version: 1
description: a test prompt
variables:
  - {{name: answer}}
system: |
  You judge.
user: |
  {user}
output_schema:
  type: {type}
  properties:
    score: {{type: integer}}
"""


def _write(
    tmp_path: Path, name: str, *, id: str | None = None, user: str = "Answer: {{answer}}", type: str = "object"
) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(PROMPT.format(id=id or name, user=user, type=type))
    return path


def test_a_well_formed_prompt_file_loads(tmp_path):
    prompt = load_prompt_file(_write(tmp_path, "fine"))
    assert prompt.ref == "fine@v1"
    assert '<data name="answer">\nhello\n</data>' in prompt.render({"answer": "hello"})[1]["content"]


def test_undeclared_placeholder_fails_with_file_line_and_field(tmp_path):
    path = _write(tmp_path, "undeclared", user="Answer: {{answer}} and {{rubric}}")
    with pytest.raises(InputError) as e:
        load_prompt_file(path)
    assert e.value.path == str(path) and "rubric" in e.value.message
    assert (e.value.field, e.value.line) == ("user", 8), f"reported field {e.value.field!r}, line {e.value.line}"


def test_bad_output_schema_fails_with_file_line_and_field(tmp_path):
    path = _write(tmp_path, "badschema", type="objekt")
    with pytest.raises(InputError) as e:
        load_prompt_file(path)
    assert e.value.path == str(path)
    assert (e.value.field, e.value.line) == ("output_schema", 10)
    assert "JSON schema" in e.value.message


def test_id_not_matching_the_file_name_fails_with_file_line_and_field(tmp_path):
    path = _write(tmp_path, "groundedness_v2", id="groundedness")
    with pytest.raises(InputError) as e:
        load_prompt_file(path)
    assert e.value.path == str(path) and (e.value.field, e.value.line) == ("id", 1)
    assert "groundedness_v2" in e.value.message


def test_unknown_key_in_a_prompt_file_fails(tmp_path):
    path = _write(tmp_path, "extra")
    path.write_text(path.read_text() + "temperature: 0.7\n")
    with pytest.raises(InputError) as e:
        load_prompt_file(path)
    assert e.value.field == "temperature" and e.value.line == 14


def test_every_bundled_prompt_matches_the_lock():
    """A prompt's bytes may change only with its version: edit a prompt, bump its version, re-lock."""
    problems = lock_problems()
    assert not problems, "\n".join(problems)


def test_a_prompt_edited_without_a_version_bump_fails_the_lock(tmp_path):
    path, lock = _write(tmp_path, "edited"), tmp_path / "prompts.lock"
    write_lock(tmp_path, lock)
    assert lock_problems(tmp_path, lock) == []
    path.write_text(path.read_text().replace("You judge.", "You judge strictly."))
    (problem,) = lock_problems(tmp_path, lock)
    assert "'edited'" in problem and "bump its version" in problem and LOCK_COMMAND in problem
    path.write_text(path.read_text().replace("version: 1", "version: 2"))
    (problem,) = lock_problems(tmp_path, lock)  # bumped, but the lock still has version 1
    assert "stale" in problem and "'edited'" in problem and LOCK_COMMAND in problem
    write_lock(tmp_path, lock)
    assert lock_problems(tmp_path, lock) == []


def test_a_stale_lock_names_added_and_removed_prompts(tmp_path, capsys):
    lock = tmp_path / "prompts.lock"
    assert "no prompt lock" in lock_problems(tmp_path, lock)[0]
    _write(tmp_path, "kept"), _write(tmp_path, "removed")
    write_lock(tmp_path, lock)
    (tmp_path / "removed.yaml").unlink()
    _write(tmp_path, "added")
    problems = lock_problems(tmp_path, lock)
    assert len(problems) == 2 and all(LOCK_COMMAND in p for p in problems)
    assert "'added'" in problems[0] and "not in the lock" in problems[0] and "'removed'" in problems[1]
    assert main([]) == 0 and "matches every prompt file" in capsys.readouterr().out  # the bundled prompts
    assert main(["--bogus"]) == 2


# ---- what the lock covers: every file's bytes with its version, the variants, and the rendering ---------


def _variant(folder: Path, name: str, *, user: str = "Answer, in other words: {{answer}}") -> Path:
    (folder / "variants").mkdir(exist_ok=True)
    path = folder / "variants" / f"{name}.yaml"
    path.write_text(PROMPT.format(id=name, user=user, type="object") + "variant: b\n")
    return path


def test_the_lock_holds_each_files_hash_and_version_the_variants_and_the_rendering(tmp_path):
    _write(tmp_path, "main"), _variant(tmp_path, "main")
    entries = write_lock(tmp_path, tmp_path / "prompts.lock")
    assert set(entries) == {"main", "variants/main", RENDERING}
    assert entries["main"]["version"] == 1 and len(entries["main"]["sha256"]) == 64
    assert entries[RENDERING] == {"sha256": rendering_hash()}


def test_a_variant_edited_without_a_version_bump_fails_the_lock(tmp_path):
    lock = tmp_path / "prompts.lock"
    _write(tmp_path, "main")
    path = _variant(tmp_path, "main")
    write_lock(tmp_path, lock)
    path.write_text(path.read_text().replace("You judge.", "You judge gently."))
    (problem,) = lock_problems(tmp_path, lock)
    assert "'variants/main'" in problem and "bump its version" in problem


def test_a_rendering_change_without_bumping_every_prompt_fails_the_lock(tmp_path, monkeypatch):
    """DATA_RULE and the data fence come from code, not from the prompt files: changing them changes what
    every judge sees, so every prompt's version must move."""
    import raglake.judge.prompts as prompts

    lock = tmp_path / "prompts.lock"
    first, second = _write(tmp_path, "first"), _write(tmp_path, "second")
    write_lock(tmp_path, lock)
    monkeypatch.setattr(prompts, "DATA_RULE", prompts.DATA_RULE + " Be brief.")
    assert rendering_hash() != json.loads(lock.read_text())[RENDERING]["sha256"]
    (problem,) = lock_problems(tmp_path, lock)
    assert "rendering" in problem and "first, second" in problem and LOCK_COMMAND in problem
    first.write_text(first.read_text().replace("version: 1", "version: 2"))
    second.write_text(second.read_text().replace("version: 1", "version: 2"))
    assert all("stale" in p for p in lock_problems(tmp_path, lock))  # bumped: only the re-lock is missing
    write_lock(tmp_path, lock)
    assert lock_problems(tmp_path, lock) == []


def test_a_variant_must_say_so_and_a_main_prompt_must_not(tmp_path):
    path = _variant(tmp_path, "bare")
    path.write_text(path.read_text().replace("variant: b\n", ""))
    with pytest.raises(InputError) as e:
        load_prompt_file(path)
    assert e.value.field == "variant"
    main = _write(tmp_path, "main")
    main.write_text(main.read_text() + "variant: b\n")
    with pytest.raises(InputError) as e:
        load_prompt_file(main)
    assert e.value.field == "variant" and e.value.line == 14


def test_a_variant_must_keep_the_variables_and_the_output_schema(tmp_path):
    kept, changed, alone = (tmp_path / name for name in ("kept", "changed", "alone"))  # loads are cached per folder
    for folder in (kept, changed, alone):
        folder.mkdir()
        _write(folder, "p")
    _variant(kept, "p")
    assert get_variant("p", kept).key == "p~b"
    path = _variant(changed, "p")
    path.write_text(path.read_text().replace("score: {type: integer}", "grade: {type: string}"))
    with pytest.raises(InputError) as e:
        get_variant("p", changed)
    assert e.value.field == "output_schema" and e.value.path == str(path)
    with pytest.raises(ConfigError, match="no variant wording"):
        get_variant("p", alone)
