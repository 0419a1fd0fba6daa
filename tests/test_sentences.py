"""The sentence splitter (answers and notes) on awkward text: abbreviations, initials, numbers,
ellipses, quotes, markdown lists and headings, code fences, and citation markers."""

from __future__ import annotations

import pytest

from raglake.text.sentences import split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Dr. Smith arrived. He sat down.", ["Dr. Smith arrived.", "He sat down."]),
        ("Dr. Smith and Prof. Jones met. They talked.", ["Dr. Smith and Prof. Jones met.", "They talked."]),
        ("Mr. and Mrs. Smith came. They left.", ["Mr. and Mrs. Smith came.", "They left."]),
        ("Use a tool, e.g. Make. Then run it.", ["Use a tool, e.g. Make.", "Then run it."]),
        ("Pick one, i.e. Python or Go. Then start.", ["Pick one, i.e. Python or Go.", "Then start."]),
        (
            "Pack the tents, stoves, etc. and leave early. Then drive.",
            ["Pack the tents, stoves, etc. and leave early.", "Then drive."],
        ),
        ("It was Lakers vs. Celtics last night. Great game.", ["It was Lakers vs. Celtics last night.", "Great game."]),
        (
            "He served in the U.S. Army for years. Then retired.",
            ["He served in the U.S. Army for years.", "Then retired."],
        ),
        (
            "We meet at 9 a.m. Monday to Friday. Lunch is at noon.",
            ["We meet at 9 a.m. Monday to Friday.", "Lunch is at noon."],
        ),
        (
            "The call is at 5 p.m. UTC on Fridays. Bring notes.",
            ["The call is at 5 p.m. UTC on Fridays.", "Bring notes."],
        ),
        ("Room No. 5 is empty. Next.", ["Room No. 5 is empty.", "Next."]),
        ("See (Fig. 3) for details. Next.", ["See (Fig. 3) for details.", "Next."]),
    ],
)
def test_abbreviations_do_not_end_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_initials_inside_a_sentence() -> None:
    assert split_sentences("The author J. R. R. Tolkien wrote it. It is long.") == [
        "The author J. R. R. Tolkien wrote it.",
        "It is long.",
    ]


def test_initials_at_the_start_of_a_line_are_kept() -> None:
    """A sentence that starts with an initial is prose, not a lettered list item: nothing is dropped."""
    assert split_sentences("J. R. R. Tolkien wrote The Hobbit. It is long.") == [
        "J. R. R. Tolkien wrote The Hobbit.",
        "It is long.",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Pi is 3.14 roughly. Version v2.0.1 shipped. It cost $1.5m in total.",
            ["Pi is 3.14 roughly.", "Version v2.0.1 shipped.", "It cost $1.5m in total."],
        ),
        ("3.14 is pi. It is irrational.", ["3.14 is pi.", "It is irrational."]),
        ("Released v2.0.1. Update now.", ["Released v2.0.1.", "Update now."]),
        ("Prices rose 3.5%. Then fell.", ["Prices rose 3.5%.", "Then fell."]),
        ("In 2020. In 2021 things changed.", ["In 2020.", "In 2021 things changed."]),
    ],
)
def test_decimals_and_versions_are_not_sentence_ends(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Wait... Really? Yes! Fine.", ["Wait...", "Really?", "Yes!", "Fine."]),
        ("Wait... then go.", ["Wait... then go."]),
        ("Well… Maybe.", ["Well…", "Maybe."]),
        ("Is this right?! Yes.", ["Is this right?!", "Yes."]),
    ],
)
def test_ellipses_and_runs_of_terminal_punctuation(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("He said 'yes.' Then no.", ["He said 'yes.'", "Then no."]),
        ("She wrote “Done.” Next step.", ["She wrote “Done.”", "Next step."]),
        ("It works (mostly.) Then it breaks.", ["It works (mostly.)", "Then it breaks."]),
        ("He asked (why?) Then left.", ["He asked (why?)", "Then left."]),
        ('First one. "Quoted start" follows.', ["First one.", '"Quoted start" follows.']),
    ],
)
def test_quotes_and_brackets_after_terminal_punctuation_stay_with_the_sentence(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_markdown_bullets_and_numbered_items_are_each_their_own_sentences() -> None:
    text = "Intro line\n- first item. Second sentence\n* star item\n+ plus item\n1. numbered step\n2) paren step"
    assert split_sentences(text) == [
        "Intro line",
        "first item.",
        "Second sentence",
        "star item",
        "plus item",
        "numbered step",
        "paren step",
    ]


def test_headings_are_their_own_sentences() -> None:
    assert split_sentences("## Heading here\nBody text. More.\n# Top\nTail") == [
        "Heading here",
        "Body text.",
        "More.",
        "Top",
        "Tail",
    ]
    assert split_sentences("#hashtag is a tag. Next one.") == ["#hashtag is a tag.", "Next one."]


def test_code_fences_are_kept_whole() -> None:
    text = "Intro.\n```python\nx = 1. Y = 2.\n\n# comment\n```\nAfter.\n~~~\ncode. More code.\n~~~\nTail."
    assert split_sentences(text) == [
        "Intro.",
        "```python\nx = 1. Y = 2.\n\n# comment\n```",
        "After.",
        "~~~\ncode. More code.\n~~~",
        "Tail.",
    ]
    assert split_sentences("Text.\n```\nunclosed. Code. Here.") == ["Text.", "```\nunclosed. Code. Here."]


def test_lines_of_a_paragraph_join_and_blank_lines_separate() -> None:
    assert split_sentences("Line one\ncontinues here. Next.") == ["Line one continues here.", "Next."]
    assert split_sentences("One.\n\n\n\nTwo.") == ["One.", "Two."]
    assert split_sentences("no end punctuation\n\n\n\nanother paragraph") == ["no end punctuation", "another paragraph"]
    assert split_sentences("   Leading spaces. Trailing   ") == ["Leading spaces.", "Trailing"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\n", " \t\n  \n\t", None])
def test_empty_and_whitespace_only_input(text: str | None) -> None:
    assert split_sentences(text) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See the docs [1]. Next sentence [2].", ["See the docs [1].", "Next sentence [2]."]),
        ("Text [1][2]. More [3].", ["Text [1][2].", "More [3]."]),
    ],
)
def test_citation_markers_before_the_full_stop_stay_attached(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the builtin target's own answer format: "sentence [rank]" joined by spaces
        ("Alpha is here. [1] Beta is there. [2]", ["Alpha is here. [1]", "Beta is there. [2]"]),
        ("Alpha is here. [1][3] Beta is there. [2]", ["Alpha is here. [1][3]", "Beta is there. [2]"]),
        ("Claims are cited.[1] Then more.[2]", ["Claims are cited.[1]", "Then more.[2]"]),
    ],
)
def test_citation_markers_after_the_full_stop_stay_with_their_sentence(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_memoised_splits_are_fresh_lists_each_time() -> None:
    """split_sentences is memoised (a run splits the same chunks for many cases): a caller changing the
    list it got must not change what the next caller gets."""
    text = "First one here. Second one there."
    got = split_sentences(text)
    got.append("tampered")
    got[0] = "changed"
    assert split_sentences(text) == ["First one here.", "Second one there."]
    assert split_sentences(None) == [] and split_sentences("") == []


def test_memoised_content_words_are_fresh_lists_and_match_a_cleared_memo() -> None:
    from raglake.text import words

    text = "Pumps pumped; the pumping [1] station."
    first = words.content_words(text)
    first.clear()
    again = words.content_words(text)
    words.clear_memo()
    assert again == words.content_words(text) == ["pump", "pump", "pump", "station"]
    assert words.content_words(None) == []
