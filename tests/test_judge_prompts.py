"""Judge prompts are files: every bundled one loads and matches its file; rendering fails on a missing
variable; a bad prompt file (undeclared placeholder, bad output schema, id not matching the file name,
unknown key) fails with file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from raglake.errors import ConfigError, InputError
from raglake.judge.prompts import get_prompt, load_prompt_file, load_prompts


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


def _write(tmp_path: Path, name: str, *, id: str | None = None, user: str = "Answer: {{answer}}",
           type: str = "object") -> Path:
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
