"""The builtin target's markdown parsing and heading-aware chunker on awkward notes: exact heading
paths, chunks that never straddle a heading, and long sections split by a token budget with overlap.
Token counts come from a stub (words + 2, like [CLS] … [SEP]), so no model is needed."""

from __future__ import annotations

import re

import pytest

from raglake.builtin.chunker import Chunk, ChunkSettings, Skipped, chunk_note
from raglake.builtin.markdown import parse_note, split_front_matter


def stub_count(texts):
    return [len(t.split()) + 2 for t in texts]


DEFAULT = ChunkSettings()


def chunk(raw: str, settings: ChunkSettings = DEFAULT, max_sequence: int = 512) -> tuple[list[Chunk], list[Skipped]]:
    return chunk_note("vault/folder/note.md", raw, settings, stub_count, max_sequence)


def paths(chunks: list[Chunk]) -> list[tuple[str, ...]]:
    return [c.heading_path for c in chunks]


def body(c: Chunk) -> str:
    """The chunk's body: its text without the heading line(s)."""
    return c.embed_text.split("\n", 1)[1] if c.heading_path else c.embed_text


# ---------------------------------------------------------------------------------------------
# headings


def test_setext_headings_make_level_one_and_two_sections() -> None:
    raw = "Title\n=====\n\nintro text\n\nSub\n-----\n\nsub body\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [("Title",), ("Title", "Sub")]
    assert [c.text for c in chunks] == ["Title\n=====\n\nintro text", "Sub\n-----\n\nsub body"]
    assert [c.embed_text for c in chunks] == ["Title\nintro text", "Title > Sub\nsub body"]
    assert [c.part for c in chunks] == [0, 0] and skipped == []


def test_setext_and_atx_headings_mix_by_level() -> None:
    raw = "intro\n\n# Doc\n\nDoc text.\n\nPart A\n------\nbody a\n\nPart B\n======\nbody b\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [(), ("Doc",), ("Doc", "Part A"), ("Part B",)]
    assert [body(c) for c in chunks] == ["intro", "Doc text.", "body a", "body b"]
    assert skipped == []


def test_thematic_break_after_blank_line_is_not_a_setext_heading() -> None:
    raw = "# Heading\npara one\n\n---\n\nmore text\n\n***\n\nlast\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [("Heading",)]
    assert chunks[0].text == "# Heading\n\npara one\n\n---\n\nmore text\n\n***\n\nlast"
    assert skipped == []


def test_dashes_under_a_list_item_are_not_a_setext_heading() -> None:
    chunks, _ = chunk("# H\n\n- item\n---\nx\n")
    assert paths(chunks) == [("H",)] and body(chunks[0]) == "- item\n---\nx"


def test_atx_headings_with_trailing_spaces_and_closing_hashes() -> None:
    raw = (
        "## Title ##   \nbody one\n"
        "### Deep #####\nbody two\n"
        "#   Spaced    Out   Title   \nbody three\n"
        "## C# notes\nbody four\n"
        "## Tag#\nbody five\n"
    )
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [
        ("Title",),
        ("Title", "Deep"),
        ("Spaced Out Title",),
        ("Spaced Out Title", "C# notes"),
        ("Spaced Out Title", "Tag#"),
    ]
    assert [body(c) for c in chunks] == ["body one", "body two", "body three", "body four", "body five"]
    assert chunks[0].text == "## Title ##\n\nbody one"
    assert skipped == []


def test_hash_without_space_and_indented_hash_are_body_text() -> None:
    raw = "# Real\n#hashtag line\n    # indented code, not a heading\n#5 is an issue number\n"
    chunks, _ = chunk(raw)
    assert paths(chunks) == [("Real",)]
    assert body(chunks[0]) == "#hashtag line\n    # indented code, not a heading\n#5 is an issue number"


def test_duplicate_heading_names_under_different_parents() -> None:
    raw = "# Week 1\nfirst week.\n## Notes\nw1 notes\n## Tasks\nw1 tasks\n# Week 2\nsecond week.\n## Notes\nw2 notes\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [("Week 1",), ("Week 1", "Notes"), ("Week 1", "Tasks"), ("Week 2",), ("Week 2", "Notes")]
    assert [body(c) for c in chunks] == ["first week.", "w1 notes", "w1 tasks", "second week.", "w2 notes"]
    assert [c.embed_text.split("\n")[0] for c in chunks] == [
        "Week 1",
        "Week 1 > Notes",
        "Week 1 > Tasks",
        "Week 2",
        "Week 2 > Notes",
    ]
    assert skipped == []


def test_heading_levels_that_skip() -> None:
    raw = "# Top\ntop.\n### Skip\nx\n## Two\ny\n### Three\nz\n# Other\n#### Deep\nw\n## Back\nv\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [
        ("Top",),
        ("Top", "Skip"),
        ("Top", "Two"),
        ("Top", "Two", "Three"),
        ("Other", "Deep"),
        ("Other", "Back"),
    ]
    assert [body(c) for c in chunks] == ["top.", "x", "y", "z", "w", "v"]
    assert skipped == [Skipped("vault/folder/note.md", ("Other",), "empty_section")]


def test_text_before_the_first_heading_has_an_empty_heading_path() -> None:
    chunks, _ = chunk("A preamble line.\n\nAnother one.\n\n# H\nbody\n")
    assert paths(chunks) == [(), ("H",)]
    assert chunks[0].text == chunks[0].embed_text == "A preamble line.\n\nAnother one."
    assert chunks[0].part == 0 and chunks[0].rel_path == "vault/folder/note.md"


def test_empty_sections_are_skipped_with_reason() -> None:
    raw = "# Empty\n   \n\t\n# Full\nbody\n## Child empty\n\n# Last empty\n"
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [("Full",)]
    assert skipped == [
        Skipped("vault/folder/note.md", ("Empty",), "empty_section"),
        Skipped("vault/folder/note.md", ("Full", "Child empty"), "empty_section"),
        Skipped("vault/folder/note.md", ("Last empty",), "empty_section"),
    ]


# ---------------------------------------------------------------------------------------------
# code fences


def test_code_fences_hide_hash_lines() -> None:
    raw = (
        "# Setup\n"
        "```bash\n# install it\npip install x\n## not a heading either\n```\n"
        "after the first fence\n"
        "~~~python\n# a comment\n```\n# still code\n~~~\n"
        "## Usage\nrun it\n"
    )
    chunks, skipped = chunk(raw)
    assert paths(chunks) == [("Setup",), ("Setup", "Usage")]
    assert body(chunks[0]) == (
        "```bash\n# install it\npip install x\n## not a heading either\n```\n"
        "after the first fence\n"
        "~~~python\n# a comment\n```\n# still code\n~~~"
    )
    assert body(chunks[1]) == "run it" and skipped == []


def test_unclosed_fence_runs_to_the_end_of_the_note() -> None:
    chunks, _ = chunk("# A\ntext\n```\n# inside\n## also inside\nmore\n")
    assert paths(chunks) == [("A",)]
    assert body(chunks[0]) == "text\n```\n# inside\n## also inside\nmore"


def test_longer_fence_is_closed_only_by_a_fence_at_least_as_long() -> None:
    """CommonMark: a ```` fence may show a ``` block; the inner ``` lines do not close it."""
    raw = "# Doc\n````markdown\n```\n# inside\n```\n````\n# Real\nx\n"
    chunks, _ = chunk(raw)
    assert paths(chunks) == [("Doc",), ("Real",)]
    assert body(chunks[0]) == "````markdown\n```\n# inside\n```\n````"


# ---------------------------------------------------------------------------------------------
# front matter


def test_valid_front_matter_is_parsed_and_not_chunked() -> None:
    raw = "---\ntitle: Plan\ntags: [a, b]\n---\n# H\nbody\n\n## S\ntext\n"
    note = parse_note(raw)
    assert note.front_matter == {"title": "Plan", "tags": ["a", "b"]} and note.front_matter_error is None
    assert [(s.heading_path, s.line) for s in note.sections] == [(("H",), 5), (("H", "S"), 8)]
    chunks, _ = chunk(raw)
    assert paths(chunks) == [("H",), ("H", "S")]
    assert not any("title" in c.text for c in chunks)


def test_invalid_yaml_front_matter_is_reported_and_the_note_still_chunks() -> None:
    raw = "---\ntitle: [unclosed\n---\n# H\nbody\n"
    note = parse_note(raw)
    assert note.front_matter == {} and "not valid YAML" in (note.front_matter_error or "")
    chunks, _ = chunk(raw)
    assert paths(chunks) == [("H",)] and body(chunks[0]) == "body"


def test_non_mapping_front_matter_is_reported() -> None:
    note = parse_note("---\n- a\n- b\n---\n# H\nx\n")
    assert note.front_matter == {} and note.front_matter_error == "front matter is not a mapping"
    assert [s.heading_path for s in note.sections] == [("H",)]


def test_unclosed_front_matter_is_body_text_not_lost() -> None:
    raw = "---\ntitle: X\n\n# H\nbody\n"
    note = parse_note(raw)
    assert note.front_matter == {} and note.front_matter_error == "front matter has no closing '---'"
    chunks, _ = chunk(raw)
    assert paths(chunks) == [(), ("H",)]
    assert "title: X" in chunks[0].text and body(chunks[1]) == "body"


def test_only_front_matter_gives_no_sections_and_no_chunks() -> None:
    raw = "---\ntitle: Draft\nstatus: idea\n---\n"
    note = parse_note(raw)
    assert note.front_matter == {"title": "Draft", "status": "idea"} and note.sections == []
    assert chunk(raw) == ([], [])


def test_split_front_matter_counts_the_lines_it_took() -> None:
    meta, rest, taken, error = split_front_matter("---\na: 1\n...\nrest\n")
    assert (meta, rest, taken, error) == ({"a": 1}, "rest\n", 3, None)
    assert split_front_matter("no front matter\n---\n") == ({}, "no front matter\n---\n", 0, None)


# ---------------------------------------------------------------------------------------------
# line endings and straddling


def test_crlf_and_cr_line_endings_parse_like_lf() -> None:
    lf = "---\ntitle: T\n---\nTitle\n=====\n\nintro\n\n## Sub ##\nline1\nline2\n```\n# code\n```\n"
    crlf_chunks, crlf_skipped = chunk(lf.replace("\n", "\r\n"))
    cr_chunks, _ = chunk(lf.replace("\n", "\r"))
    lf_chunks, lf_skipped = chunk(lf)
    assert paths(lf_chunks) == [("Title",), ("Title", "Sub")]
    assert crlf_chunks == lf_chunks == cr_chunks and crlf_skipped == lf_skipped
    assert not any("\r" in c.text or "\r" in c.embed_text for c in crlf_chunks)
    assert parse_note(lf.replace("\n", "\r\n")).front_matter == {"title": "T"}


AWKWARD = """---
title: awkward
---
Lead paragraph before any heading.

Overview
========

Overview text.

# Install ##
```sh
# comment in a fence
make install
```

~~~
## tilde fence
~~~

Detail
------
Detail text.

### Deeper  
deep text

---

after a thematic break
# Week 1
## Notes
w1
# Week 2
## Notes
w2
"""


def test_awkward_note_exact_paths_and_no_chunk_straddles_a_heading() -> None:
    chunks, skipped = chunk(AWKWARD)
    assert [(c.heading_path, body(c)) for c in chunks] == [
        ((), "Lead paragraph before any heading."),
        (("Overview",), "Overview text."),
        (("Install",), "```sh\n# comment in a fence\nmake install\n```\n\n~~~\n## tilde fence\n~~~"),
        (("Install", "Detail"), "Detail text."),
        (("Install", "Detail", "Deeper"), "deep text\n\n---\n\nafter a thematic break"),
        (("Week 1", "Notes"), "w1"),
        (("Week 2", "Notes"), "w2"),
    ]
    assert [s.heading_path for s in skipped] == [("Week 1",), ("Week 2",)]
    assert {s.reason for s in skipped} == {"empty_section"}
    # each chunk's text starts with its own heading and holds no other heading line outside a fence
    for c in chunks:
        lines = c.text.split("\n")
        in_fence = False
        for line in lines[1:] if c.heading_path else lines:
            if line.startswith(("```", "~~~")):
                in_fence = not in_fence
                continue
            assert in_fence or not line.startswith("#"), (c.heading_path, line)


# ---------------------------------------------------------------------------------------------
# long sections


def _overlap(prev: list[str], nxt: list[str]) -> list[str]:
    """The longest run of lines that ends `prev` and starts `nxt`."""
    for k in range(min(len(prev), len(nxt)), 0, -1):
        if prev[-k:] == nxt[:k]:
            return nxt[:k]
    return []


def _check_split(chunks: list[Chunk], heading: str, settings: ChunkSettings, require_overlap: bool = True) -> None:
    assert len(chunks) > 1
    assert [c.part for c in chunks] == list(range(1, len(chunks) + 1))
    for c in chunks:
        assert c.n_tokens <= settings.max_tokens
        assert stub_count([c.embed_text])[0] == c.n_tokens
        assert c.embed_text.startswith(heading + "\n")
    # segments: lines, and sentences within a line (a split keeps a line's sentences on one line)
    bodies = [re.split(r"\n|(?<=[.!?])[ \t]+", body(c)) for c in chunks]
    for prev, nxt in zip(bodies, bodies[1:]):
        shared = _overlap([line for line in prev if line], [line for line in nxt if line])
        if require_overlap:
            assert shared, (prev, nxt)
        assert sum(stub_count(shared)) <= settings.overlap_tokens  # at most overlap_tokens carried over
        assert len(shared) < len([line for line in nxt if line])  # every part brings new text


LINES = [f"line{i:02d} alpha beta gamma delta" for i in range(24)]
LONG = "# Long\n## Part\n" + "\n".join(LINES[:12]) + "\n\n" + "\n".join(LINES[12:]) + "\n# Next\nshort\n"


def test_long_section_is_split_into_numbered_overlapping_parts_within_budget() -> None:
    settings = ChunkSettings(max_tokens=40, overlap_tokens=15)
    assert stub_count(["Long > Part\n" + "\n".join(LINES)])[0] > settings.max_tokens
    chunks, skipped = chunk(LONG, settings)
    parts = [c for c in chunks if c.heading_path == ("Long", "Part")]
    _check_split(parts, "Long > Part", settings)
    # no text is lost, and the parts keep the lines in order
    for line in LINES:
        assert any(line in body(c).split("\n") for c in parts), line
    first_seen = [min(i for i, c in enumerate(parts) if line in body(c)) for line in LINES]
    assert first_seen == sorted(first_seen)
    # the overlap is carried from the end of the previous part
    for prev, nxt in zip(parts, parts[1:]):
        assert body(nxt).split("\n")[0] in body(prev).split("\n")
    # the next heading is its own chunk, never folded into the split section
    assert paths(chunks)[-1] == ("Next",) and chunks[-1].text == "# Next\n\nshort"
    assert all("Next" not in c.text and "short" not in c.text for c in parts)
    assert skipped == [Skipped("vault/folder/note.md", ("Long",), "empty_section")]


def test_split_without_overlap_partitions_the_lines_exactly() -> None:
    settings = ChunkSettings(max_tokens=40, overlap_tokens=0)
    chunks, _ = chunk(LONG, settings)
    parts = [c for c in chunks if c.heading_path == ("Long", "Part")]
    _check_split(parts, "Long > Part", settings, require_overlap=False)
    lines = [line for c in parts for line in body(c).split("\n") if line]
    assert lines == LINES


def test_long_line_of_sentences_is_split_at_sentence_ends_with_overlap() -> None:
    sentences = [f"Sentence number {i} has some words here." for i in range(30)]
    settings = ChunkSettings(max_tokens=40, overlap_tokens=15)
    chunks, skipped = chunk("# Prose\n" + " ".join(sentences) + "\n", settings)
    assert skipped == []
    _check_split(chunks, "Prose", settings)
    for s in sentences:
        assert any(s in body(c) for c in chunks), s


def test_long_line_without_punctuation_is_split_at_words_with_overlap() -> None:
    words = [f"w{i}" for i in range(100)]
    settings = ChunkSettings(max_tokens=40, overlap_tokens=15)
    chunks, skipped = chunk("# Words\n" + " ".join(words) + "\n", settings)
    assert skipped == []
    for w in words:  # no word is lost
        assert any(w in body(c).split() for c in chunks), w
    # consecutive parts overlap: the next part starts with words from the end of the previous one
    _check_split(chunks, "Words", settings, require_overlap=False)
    for prev, nxt in zip(chunks, chunks[1:]):
        prev_words, next_words = body(prev).split(), body(nxt).split()
        shared = next(
            (k for k in range(min(len(prev_words), len(next_words)), 0, -1) if prev_words[-k:] == next_words[:k]), 0
        )
        assert 0 < shared and stub_count([" ".join(next_words[:shared])])[0] <= settings.overlap_tokens, (
            prev.part,
            nxt.part,
            prev_words[-3:],
            next_words[:3],
        )


def test_chunk_over_max_sequence_is_skipped_never_truncated() -> None:
    long_body = " ".join(["word"] * 30)
    raw = f"# Big\n{long_body}\n# Small\nfine text\n"
    chunks, skipped = chunk(raw, ChunkSettings(max_tokens=200), max_sequence=20)
    assert paths(chunks) == [("Small",)] and chunks[0].text == "# Small\n\nfine text"
    assert skipped == [Skipped("vault/folder/note.md", ("Big",), "over_max_sequence")]
    assert not any("word" in c.text for c in chunks)


def test_split_parts_over_max_sequence_are_skipped_others_kept_whole() -> None:
    settings = ChunkSettings(max_tokens=40, overlap_tokens=0)
    chunks_all, _ = chunk(LONG, settings)
    sizes = [c.n_tokens for c in chunks_all if c.heading_path == ("Long", "Part")]
    limit = sorted(set(sizes))[0]  # keep only the smallest parts
    assert any(n > limit for n in sizes)
    chunks, skipped = chunk(LONG, settings, max_sequence=limit)
    kept = [c for c in chunks if c.heading_path == ("Long", "Part")]
    over = [s for s in skipped if s.reason == "over_max_sequence"]
    assert len(kept) + len(over) == len(sizes) and len(over) == sum(n > limit for n in sizes)
    assert all(s.heading_path == ("Long", "Part") for s in over)
    whole = {c.part: c for c in chunks_all}
    for c in kept:  # a kept part is the same as without the limit: nothing cut off
        assert c.n_tokens <= limit and c.text == whole[c.part].text


@pytest.mark.parametrize(("max_tokens", "overlap"), [(8, 0), (15, 2), (40, 20), (40, 25), (40, -1)])
def test_bad_chunk_settings_are_rejected(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError, match="bad chunk settings"):
        ChunkSettings(max_tokens=max_tokens, overlap_tokens=overlap)
