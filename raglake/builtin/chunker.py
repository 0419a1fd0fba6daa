"""Heading-aware chunking: one chunk per heading section, never across a heading; a section longer
than the token budget is split at line, then sentence, then word boundaries, with overlap."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raglake.builtin.markdown import Section, parse_note

CHUNKER_VERSION = "md-heading-2"  # 2: fences close only on a run as long as the opening; word-run splits keep overlap
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")

CountTokens = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True)
class ChunkSettings:
    max_tokens: int = 200  # budget per chunk, counted with the embedder's tokenizer
    overlap_tokens: int = 40  # carried from the end of one part to the start of the next
    min_body_chars: int = 1  # a section whose body is shorter is skipped as `empty_section`

    def __post_init__(self) -> None:
        if self.max_tokens < 16 or not 0 <= self.overlap_tokens < self.max_tokens // 2:
            raise ValueError(f"bad chunk settings: max_tokens={self.max_tokens}, overlap_tokens={self.overlap_tokens}")


@dataclass(frozen=True)
class Chunk:
    rel_path: str
    heading_path: tuple[str, ...]
    part: int  # 0 for a whole section; 1, 2, … for the parts of a split one
    text: str  # heading line + body (part): what a capture shows
    embed_text: str  # heading path + body (part): what the embedder reads
    n_tokens: int


@dataclass(frozen=True)
class Skipped:
    rel_path: str
    heading_path: tuple[str, ...]
    reason: str  # empty_section | over_max_sequence


Unit = tuple[str, str]  # (text, the separator that joins it to the unit before: "\n" or " ")


def _approx(text: str) -> int:
    """A cheap token estimate (1.3 tokens a word) to decide what must be cut before counting."""
    return int(len(text.split()) * 1.3) + 1


def _units(body: str, budget: int, overlap: int) -> list[Unit]:
    """Lines, cut into sentences; a sentence longer than the budget cut into word runs small enough
    (about half the overlap) that the overlap can carry them."""
    units: list[Unit] = []
    step = max(1, int(max(overlap, 8) / 2 / 1.3))
    for line in body.split("\n"):
        joiner = "\n"
        for sentence in _SENTENCE_END.split(line):
            words = sentence.split()
            pieces = (
                [" ".join(words[i : i + step]) for i in range(0, len(words), step)]
                if _approx(sentence) > budget
                else [sentence]
            )
            for piece in pieces:
                units.append((piece, joiner))
                joiner = " "
    return units


def _join(units: list[Unit]) -> str:
    return "".join((joiner if i else "") + text for i, (text, joiner) in enumerate(units)).strip()


def _split_units(units: list[Unit], counts: list[int], budget: int, overlap: int) -> list[list[Unit]]:
    """Greedy packing of units into parts of at most `budget` tokens, each part starting with up to
    `overlap` tokens of the previous part's tail."""
    parts: list[list[Unit]] = []
    current: list[tuple[Unit, int]] = []
    used = 0
    for unit, n in zip(units, counts):
        if current and used + n > budget:
            parts.append([u for u, _ in current])
            tail: list[tuple[Unit, int]] = []
            carried = 0
            for prev, pn in reversed(current):
                if carried + pn > overlap or carried + pn + n > budget:
                    break
                tail.insert(0, (prev, pn))
                carried += pn
            current, used = tail, carried
        current.append((unit, n))
        used += n
    if current:
        parts.append([u for u, _ in current])
    return parts


def chunk_section(
    rel_path: str, section: Section, settings: ChunkSettings, count: CountTokens, max_sequence: int
) -> tuple[list[Chunk], list[Skipped]]:
    if len(section.body.strip()) < settings.min_body_chars:
        return [], [Skipped(rel_path, section.heading_path, "empty_section")]
    context = " > ".join(section.heading_path)
    head_tokens = count([context])[0] if context else 0
    budget = max(16, settings.max_tokens - head_tokens)
    whole = count([section.body])[0]
    if whole <= budget:
        bodies = [section.body]
    else:
        units = _units(section.body, budget, settings.overlap_tokens)
        counts = count([text for text, _ in units])
        bodies = [b for b in (_join(p) for p in _split_units(units, counts, budget, settings.overlap_tokens)) if b]
    embed_texts = [f"{context}\n{b}" if context else b for b in bodies]
    sizes = count(embed_texts)
    chunks, skipped = [], []
    for n, (body, embed_text, size) in enumerate(zip(bodies, embed_texts, sizes), start=1):
        if size > max_sequence:  # never silently truncated: the model would not see the end of it
            skipped.append(Skipped(rel_path, section.heading_path, "over_max_sequence"))
            continue
        text = f"{section.heading_line}\n\n{body}" if section.heading_line else body
        chunks.append(Chunk(rel_path, section.heading_path, 0 if len(bodies) == 1 else n, text, embed_text, size))
    return chunks, skipped


def chunk_note(
    rel_path: str, raw: str, settings: ChunkSettings, count: CountTokens, max_sequence: int
) -> tuple[list[Chunk], list[Skipped]]:
    chunks: list[Chunk] = []
    skipped: list[Skipped] = []
    for section in parse_note(raw).sections:
        c, s = chunk_section(rel_path, section, settings, count, max_sequence)
        chunks.extend(c)
        skipped.extend(s)
    return chunks, skipped
