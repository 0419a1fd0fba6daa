"""The README leads (issue 27, finding 8): it opens with a table of contents whose links all reach a
heading, its parts come in the order a user needs them (first steps, your data, reading results, the
metrics and how far to trust them, making it yours, running it for real, the lake, then a pointer for
developers), every link inside it or to a file beside it resolves, and no internal word is left: the
documents the metrics came from are named plainly, their seed numbers only in the Sources list. The
developer material it used to carry lives in docs/architecture.md and docs/benchmarks.md."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"
PARTS = [
    "Contents",
    "Two commands",
    "Evaluating your own system",
    "Reading results",
    "Metrics and how far to trust them",
    "Make it yours",
    "Running it for real",
    "The lake",
    "For developers",
]
SEED_NUMBER = re.compile(r"\bseeds?[ -]?0\d\d\b", flags=re.I)


def prose(text: str) -> str:
    """The markdown without its fenced code blocks (a `# comment` in a block is not a heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def headings(text: str) -> list[tuple[int, str]]:
    return [(len(m.group(1)), m.group(2).strip()) for m in re.finditer(r"^(#{1,6}) (.+)$", prose(text), flags=re.M)]


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces as '-', repeats -1, -2."""
    seen: dict[str, int] = {}
    out = set()
    for _, title in headings(text):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", prose(text))


def section(text: str, title: str) -> str:
    """The text under one heading, up to the next heading of its level or above."""
    found = [(m.start(), m.end(), len(m.group(1))) for m in re.finditer(r"^(#{1,6}) (.+)$", text, flags=re.M)]
    for i, (start, end, level) in enumerate(found):
        if text[start:end].split(" ", 1)[1].strip() == title:
            after = [s for s, _, lv in found[i + 1 :] if lv <= level]
            return text[end : after[0] if after else len(text)]
    raise AssertionError(f"no heading {title!r}")


def test_the_readme_opens_with_a_table_of_contents_whose_links_reach_headings() -> None:
    text = README.read_text(encoding="utf-8")
    parts = [title for level, title in headings(text) if level == 2]
    assert parts[0] == "Contents", parts
    contents = section(text, "Contents")
    targets = [link for link in links(contents)]
    assert len(targets) >= len(PARTS) - 1 and all(t.startswith("#") for t in targets), targets
    known = anchors(text)
    assert [t for t in targets if t[1:] not in known] == []
    # every part of the README is in it
    for title in parts[1:]:
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        assert f"(#{slug})" in contents, title
    # it comes right after the short "what it is": no more than one paragraph before it
    intro = text[text.index("\n") : text.index("\n## Contents\n")].strip()
    assert intro and "\n\n" not in intro


def test_the_parts_come_in_the_order_a_user_needs_them() -> None:
    parts = [title for level, title in headings(README.read_text(encoding="utf-8")) if level == 2]
    assert parts == PARTS


def test_every_link_inside_the_readme_and_to_the_docs_resolves() -> None:
    for page in (README, ROOT / "docs" / "architecture.md", ROOT / "docs" / "benchmarks.md"):
        text = page.read_text(encoding="utf-8")
        for link in links(text):
            if re.match(r"[a-z]+://", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path) if path else page
            assert target.exists(), f"{page.name}: {link}"
            if anchor:
                assert target.suffix == ".md" and anchor in anchors(target.read_text(encoding="utf-8")), (
                    f"{page.name}: {link}"
                )


def test_no_seed_numbers_outside_the_sources_list() -> None:
    text = README.read_text(encoding="utf-8")
    sources = section(text, "Sources")
    assert len(SEED_NUMBER.findall(sources)) == 5  # the list maps each plain name to its document
    rest = text.replace(sources, "")
    assert SEED_NUMBER.findall(rest) == []
    assert "seeds'" not in rest and "the seed's" not in rest.lower()


def _underscores(name: str) -> list[int]:
    return [i for i, c in enumerate(name) if c == "_"]


def test_the_developer_material_lives_in_docs() -> None:
    text = README.read_text(encoding="utf-8")
    titles = {title for _, title in headings(text)}
    assert not titles & {"Layers", "Layout", "Benchmarks", "Orchestration"}
    architecture = {t for _, t in headings((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))}
    assert {"Layout", "Layers"} <= architecture
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    for script in sorted(Path(ROOT / "benchmarks").glob("*.py")):
        name = script.name
        if name.startswith("_") or any((script.parent / f"{name[:i]}.py").exists() for i in _underscores(name)):
            continue  # shared helpers, and the parts of a script (X_*.py belongs to X.py)
        assert f"`{name}`" in benchmarks, name
    for_developers = section(text, "For developers")
    for page in ("DEVELOPERS.md", "docs/architecture.md", "docs/benchmarks.md"):
        assert f"]({page})" in for_developers, page


def test_the_layers_diagram_names_every_layer_of_the_contract() -> None:
    """docs/architecture.md's diagram is the import-linter contract of pyproject.toml drawn out: a layer added
    there and not here (raglake.config was) is a stale diagram."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    layers = next(c["layers"] for c in contract["contracts"] if c["type"] == "layers")
    modules = {m.strip("() ").removeprefix("raglake.") for layer in layers for m in layer.split("|")}
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = re.search(r"## Layers\n.*?```\n(.*?)```", text, flags=re.S).group(1)
    named = set(re.findall(r"[a-z_]+", diagram))
    assert sorted(modules - named) == []
