"""Heading-aware chunking: one chunk per heading section, never across a heading; a section longer
than the token budget is split at line, then sentence, then word boundaries, with overlap."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from raglake.builtin.markdown import Section, parse_note

CHUNKER_VERSION = "md-heading-1"
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


def _units(body: str) -> list[str]:
    """Lines, and sentences of lines that are prose; blank lines are kept as paragraph breaks."""
    units: list[str] = []
    for line in body.split("\n"):
        units.extend(_SENTENCE_END.split(line) if len(line) > 200 else [line])
    return units


def _split_units(units: list[str], counts: list[int], budget: int, overlap: int) -> list[list[str]]:
    """Greedy packing of units into parts of at most `budget` tokens, each part starting with up to
    `overlap` tokens of the previous part's tail."""
    parts: list[list[str]] = []
    current: list[tuple[str, int]] = []
    used = 0
    for unit, n in zip(units, counts):
        if current and used + n > budget:
            parts.append([u for u, _ in current])
            tail: list[tuple[str, int]] = []
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


def _approx(text: str) -> int:
    """A cheap upper-ish token estimate for overlap bookkeeping (1.3 tokens a word)."""
    return int(len(text.split()) * 1.3) + 1


def _words(unit: str, budget: int) -> list[str]:
    """A unit longer than the budget, cut into word runs of about budget/1.5 words."""
    words = unit.split()
    step = max(1, int(budget / 1.5))
    return [" ".join(words[i : i + step]) for i in range(0, len(words), step)]


def chunk_section(rel_path: str, section: Section, settings: ChunkSettings, count: CountTokens,
                  max_sequence: int) -> tuple[list[Chunk], list[Skipped]]:
    if len(section.body.strip()) < settings.min_body_chars:
        return [], [Skipped(rel_path, section.heading_path, "empty_section")]
    context = " > ".join(section.heading_path)
    head_tokens = count([context])[0] if context else 0
    budget = max(16, settings.max_tokens - head_tokens)
    whole = count([section.body])[0]
    if whole <= budget:
        bodies = [section.body]
    else:
        units = [u for unit in _units(section.body) for u in ([unit] if _approx(unit) <= budget else _words(unit, budget))]
        counts = count(units)
        bodies = ["\n".join(p).strip() for p in _split_units(units, counts, budget, settings.overlap_tokens)]
        bodies = [b for b in bodies if b]
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


def chunk_note(rel_path: str, raw: str, settings: ChunkSettings, count: CountTokens,
               max_sequence: int) -> tuple[list[Chunk], list[Skipped]]:
    chunks: list[Chunk] = []
    skipped: list[Skipped] = []
    for section in parse_note(raw).sections:
        c, s = chunk_section(rel_path, section, settings, count, max_sequence)
        chunks.extend(c)
        skipped.extend(s)
    return chunks, skipped
