"""Strict reading of YAML files: PyYAML's safe loader without duplicate keys, NaN/Infinity, lone surrogates,
nesting past 2 x MAX_NESTING or alias expansions past MAX_ALIAS_NODES; every problem is an InputError naming
file and line (raglake.textfiles reads the text)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import yaml

from raglake.errors import InputError
from raglake.textfiles import LONE_SURROGATE, MAX_NESTING, LineIndex

MAX_ALIAS_NODES = 10_000  # values YAML aliases may add to one document, all expansions together
_FLOAT_TAG = "tag:yaml.org,2002:float"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting past 2 × MAX_NESTING (PyYAML's scanner is quadratic in the depth, then
    it recurses too deep), an alias inside its own anchor (a recursive structure), and aliases that expand
    to more than MAX_ALIAS_NODES values in all (a "billion laughs": nine anchors of nine aliases each are
    387 million values, which whatever walks the data then takes hours over)."""

    _depth = 0

    def __init__(self, stream: str):
        super().__init__(stream)
        self._expanded = 0  # values the aliases so far stand for
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> (values, levels) with aliases expanded
        self._open: set[str] = set()  # anchors whose node is still being composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            return self._alias(parent, index, event)
        if self._depth >= 2 * MAX_NESTING:
            raise yaml.composer.ComposerError(
                None, None, f"nested deeper than {2 * MAX_NESTING} levels", event.start_mark
            )
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open.add(anchor)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open.discard(anchor)

    def _alias(self, parent: yaml.Node | None, index: Any, event: yaml.AliasEvent) -> yaml.Node:
        def refuse(problem: str) -> yaml.composer.ComposerError:
            return yaml.composer.ComposerError(None, None, problem, event.start_mark)

        if event.anchor in self._open:
            raise refuse(f"alias *{event.anchor} inside its own anchor (a recursive structure) is not allowed")
        node = super().compose_node(parent, index)
        values, levels = self._expansion(node)
        self._expanded += values
        if self._expanded > MAX_ALIAS_NODES:
            raise refuse(
                f"aliases expand to more than {MAX_ALIAS_NODES} values (anchors of anchors: a 'billion laughs'); "
                "write the values out or reuse fewer"
            )
        if self._depth + levels > 2 * MAX_NESTING:
            raise refuse(f"alias *{event.anchor} nests the document deeper than {2 * MAX_NESTING} levels")
        return node

    def _expansion(self, root: yaml.Node) -> tuple[int, int]:
        """(values, levels) of a composed node with its aliases expanded, remembered per node."""
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, children_done = stack.pop()
            if id(node) in self._sizes:
                continue
            children = _children(node)
            if not children_done:
                stack.append((node, True))
                stack.extend((c, False) for c in children if id(c) not in self._sizes)
                continue
            sizes = [self._sizes[id(c)] for c in children]
            self._sizes[id(node)] = (1 + sum(v for v, _ in sizes), 1 + max((d for _, d in sizes), default=0))
        return self._sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str) -> Any:
    """yaml.safe_load with the bounds of _BoundedLoader (nesting, aliases); a problem is a yaml.YAMLError."""
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class _StrictLoader(_BoundedLoader):
    """_BoundedLoader that also refuses a key written twice in one mapping (merged `<<` keys may be overridden)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep)


def parse_yaml(path: str | Path, text: str) -> tuple[Any, Any]:
    """The document and its node tree (for line numbers); every problem names the file and line."""
    lines = LineIndex(text)
    try:
        loader = _StrictLoader(text)  # the reader checks for unprintable characters here
    except yaml.reader.ReaderError as e:
        raise InputError(
            str(path), lines.line(e.position), None, f"invalid YAML: {e.reason} (#x{e.character:04x})"
        ) from None
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        _check_yaml_scalars(path, node, loader, lines)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = lines.line(mark.index) if mark else lines.line(loader.get_mark().index)
        raise InputError(str(path), line, None, f"invalid YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise InputError(str(path), lines.line(loader.get_mark().index), None, f"invalid YAML: {e}") from None
    except RecursionError:
        raise InputError(str(path), lines.line(loader.get_mark().index), None, "YAML nested too deeply") from None
    finally:
        loader.dispose()
    return data, node


def _check_yaml_scalars(path: str | Path, root: Any, loader: _StrictLoader, lines: LineIndex) -> None:
    """Lone surrogates (from escapes) and NaN/Infinity floats, at their own line."""
    stack, seen = [root] if root is not None else [], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            problem = None
            if LONE_SURROGATE.search(node.value):
                problem = f"a lone surrogate ({LONE_SURROGATE.search(node.value).group()!a}) is not text"
            elif node.tag == _FLOAT_TAG and not math.isfinite(loader.construct_yaml_float(node)):
                problem = f"{node.value} (NaN or Infinity) is not allowed; write null"
            if problem:
                raise InputError(str(path), lines.line(node.start_mark.index), None, problem)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        else:
            stack.extend(n for pair in reversed(node.value) for n in reversed(pair))
