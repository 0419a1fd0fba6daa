"""Hostile config files (issue 25): a YAML billion-laughs (aliases expanding exponentially) hung the http
target config's `body:`; every YAML raglake reads (http target config, gate rules, judge prices, prompt
files, markdown front matter) now ends quickly with an error naming the file and line. A 59 MB gate file
took > 90 s and 2.2 GB: config files are refused past a documented size, before they are parsed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from raglake.builtin.markdown import parse_note
from raglake.errors import InputError
from raglake.gate import load_rules
from raglake.judge.config import load_prices
from raglake.judge.prompts import load_prompt_file
from raglake.targets.http_config import load_http_config
from raglake.textfiles import CONFIG_MAX_BYTES
from raglake.yamltext import MAX_ALIAS_NODES, parse_yaml

# nine lists of nine, each of the one before: 9**9 (387 million) strings once expanded; 10 lines
LAUGHS = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'] + [
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")
]


def laughs(indent: str = "") -> str:
    return "".join(f"{indent}{line}\n" for line in LAUGHS)


def quickly(load: Callable[[], object], seconds: float = 60.0) -> BaseException | None:
    """What `load` raised (None: nothing), failing the test when it has not ended within `seconds`: a guard against
    a hang (an unbounded alias expansion never ends), not a speed test; the bound is far above what a bounded
    parse takes on a loaded machine (the thread is left behind: only a test that fails anyway leaves one)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            load()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    start = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert outcome, f"still loading after {seconds} s"
    assert time.monotonic() - start < seconds
    return outcome[0]


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def assert_refused_aliases(error: BaseException | None, path: Path) -> None:
    assert isinstance(error, InputError), repr(error)
    assert error.path == str(path) and error.line is not None
    assert "alias" in error.message and str(MAX_ALIAS_NODES) in error.message
    assert str(error).startswith(f"{path}:{error.line}:")
    assert 2 <= error.line <= len(path.read_text().splitlines())


# ---- YAML aliases --------------------------------------------------------------------------------------


def test_a_billion_laughs_in_an_http_configs_body_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text("url: http://127.0.0.1:9/q\nbody:\n" + laughs("  ") + "  question: '{question}'\n")
    assert_refused_aliases(quickly(lambda: load_http_config(path)), path)


def test_a_billion_laughs_in_gate_rules_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text("defaults:\n  max_drop: 0.01\nrules:\n  - metric: mrr_at_k\n    dimensions:\n" + laughs("      "))
    assert_refused_aliases(quickly(lambda: load_rules(path)), path)


def test_a_billion_laughs_in_a_judge_price_file_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(laughs() + "models:\n  m: {input: 1.0, output: 2.0}\n")
    assert_refused_aliases(quickly(lambda: load_prices(path)), path)


def test_a_billion_laughs_in_a_prompt_file_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "groundedness.yaml"
    path.write_text("id: groundedness\nversion: 1\n" + laughs())
    assert_refused_aliases(quickly(lambda: load_prompt_file(path)), path)


def test_a_billion_laughs_in_front_matter_is_a_front_matter_error_naming_its_line() -> None:
    raw = "---\ntitle: x\n" + laughs() + "---\n# Heading\nbody text\n"
    note: list = []
    assert quickly(lambda: note.append(parse_note(raw))) is None
    [note] = note
    assert note.front_matter == {} and note.sections  # the note is still indexed, without its front matter
    error = note.front_matter_error or ""
    assert "alias" in error and str(MAX_ALIAS_NODES) in error
    line = int(error.split("line ")[1].split(")")[0].split(":")[0])
    assert 3 <= line <= 2 + len(LAUGHS)  # a line of the note itself, the '---' counted


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(InputError, match="alias") as info:
        parse_yaml("x.yaml", "a: 1\nb: &b\n  - c\n  - *b\n")
    assert info.value.line == 4


@pytest.mark.parametrize(
    "text",
    [
        "defaults: &d {max_drop: 0.01, min_pairs: 3}\nrules:\n  - {<<: *d, metric: mrr_at_k}\n",
        "base: &b [1, 2, 3]\nmore: [*b, *b, *b]\n",
    ],
)
def test_aliases_that_stay_small_still_load(text: str) -> None:
    data, _ = parse_yaml("ok.yaml", text)
    assert data


def test_front_matter_with_a_small_alias_still_loads() -> None:
    note = parse_note("---\ntags: &t [a, b]\naliases: *t\n---\n# H\nx\n")
    assert note.front_matter == {"tags": ["a", "b"], "aliases": ["a", "b"]} and note.front_matter_error is None


# ---- config file size ------------------------------------------------------------------------------------


def padded(head: str, size: int) -> str:
    """`head` plus YAML comment lines, `size` bytes in all."""
    line = "# " + "x" * 97 + "\n"
    body = head + line * ((size - len(head)) // len(line))
    return body + "#" * (size - len(body) - 1) + "\n" if size > len(body) else body


@pytest.mark.parametrize(
    "name, head, load",
    [
        ("gate.yaml", "rules:\n  - metric: mrr_at_k\n", load_rules),
        ("svc.yaml", "url: http://127.0.0.1:9/q\n", load_http_config),
        ("prices.yaml", "models: {}\n", load_prices),
        ("groundedness.yaml", "id: groundedness\n", load_prompt_file),
    ],
)
def test_a_config_file_over_the_limit_is_refused_before_parsing(tmp_path: Path, name: str, head: str, load) -> None:  # noqa: ANN001
    assert CONFIG_MAX_BYTES == 2**20
    path = tmp_path / name
    path.write_text(padded(head, CONFIG_MAX_BYTES + 1))
    error = quickly(lambda: load(path), seconds=30)  # unchecked, this took over 90 s
    assert isinstance(error, InputError) and error.path == str(path)
    assert f"at most {CONFIG_MAX_BYTES} bytes" in error.message and str(CONFIG_MAX_BYTES + 1) in error.message
    # checked before parsing: 59 MB that are no YAML at all get the same answer, fast
    path.write_bytes(b"[" * 59_000_000)
    error = quickly(lambda: load(path), seconds=30)  # unchecked, this took over 90 s
    assert isinstance(error, InputError) and f"at most {CONFIG_MAX_BYTES} bytes" in error.message


def test_a_config_file_at_the_limit_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text(padded("rules:\n  - metric: mrr_at_k\n", CONFIG_MAX_BYTES))
    assert path.stat().st_size == CONFIG_MAX_BYTES
    assert load_rules(path).rules[0].metric == "mrr_at_k"
