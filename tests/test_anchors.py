"""Anchor matching (METRICS.md §1): heading_path and rel_path normalisation, segment-prefix
matching, snippet matching and path_under_folder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raglake.anchors import (
    _rel_path_uncached,
    _split_heading_uncached,
    anchor_matches,
    fold_text,
    heading_segments,
    normalise_rel_path,
    path_under_folder,
    segments_start_with,
)
from raglake.schemas import Capture, GoldenCase, GoldSupport, RetrievedChunk
from tests.rowpath import score_one

# ---- heading_path normalisation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("A > B > C", ("A", "B", "C")),
        ("A>B>C", ("A", "B", "C")),
        # '/' and '#' are separators only when there is no '>'
        ("A / B / C", ("A", "B", "C")),
        ("A#B#C", ("A", "B", "C")),
        ("A / B # C", ("A", "B", "C")),
        ("# Atlas ## Database", ("Atlas", "Database")),
        ("A > B/C", ("A", "B/C")),
        ("A > B#C", ("A", "B#C")),
        ("Q1/Q2 > Plans", ("Q1/Q2", "Plans")),
        # strip each segment, collapse inner whitespace (spaces, tabs, newlines)
        ("  Atlas   >   Data\t\tbase  ", ("Atlas", "Data base")),
        ("Atlas >\n Blockers  and \n risks", ("Atlas", "Blockers and risks")),
        # drop empty segments
        ("A >> B >", ("A", "B")),
        (">A> >B", ("A", "B")),
        ("//A//B/", ("A", "B")),
        ("", ()),
        ("   ", ()),
        (" > > ", ()),
    ],
)
def test_heading_segments_normalisation(raw, expected):
    assert heading_segments(raw) == expected


def test_heading_segments_none_is_empty():
    assert heading_segments(None) == ()


def test_heading_segments_is_case_sensitive():
    # normalisation does not fold case, so 'atlas' and 'Atlas' stay distinct segments
    assert heading_segments("atlas > database") == ("atlas", "database")
    assert heading_segments("Atlas > Database") != heading_segments("atlas > database")


def test_heading_segments_list_and_string_spellings_agree():
    assert heading_segments(["Atlas", "  Data   base "]) == heading_segments("Atlas > Data base")
    assert heading_segments(["A", "", "B"]) == ("A", "B")


def test_schema_normalises_heading_path_string_and_list():
    a = GoldSupport.model_validate({"rel_path": "x.md", "heading_path": " Atlas  >Database "})
    b = GoldSupport.model_validate({"rel_path": "x.md", "heading_path": ["Atlas", "Database"]})
    c = GoldSupport.model_validate({"rel_path": "x.md", "heading_path": "Atlas/Database"})
    assert a.heading_path == b.heading_path == c.heading_path == ("Atlas", "Database")


# ---- rel_path normalisation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("work/atlas.md", "work/atlas.md"),
        ("work\\atlas.md", "work/atlas.md"),
        ("work\\projects\\atlas.md", "work/projects/atlas.md"),
        ("./work/atlas.md", "work/atlas.md"),
        (".\\work\\atlas.md", "work/atlas.md"),
        ("atlas.md", "atlas.md"),
        # only a *leading* './' is stripped
        ("work/./atlas.md", "work/./atlas.md"),
        ("../atlas.md", "../atlas.md"),
    ],
)
def test_normalise_rel_path(raw, expected):
    assert normalise_rel_path(raw) == expected


def test_schema_normalises_rel_path_on_chunks_and_supports():
    chunk = RetrievedChunk.model_validate({"rank": 1, "rel_path": ".\\work\\atlas.md"})
    support = GoldSupport.model_validate({"rel_path": "./work/atlas.md"})
    assert chunk.rel_path == support.rel_path == "work/atlas.md"


# ---- segment-prefix matching -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("chunk", "support", "expected"),
    [
        ("A > B", "A > B", True),
        ("A > B > C", "A > B", True),
        ("A > B > C > D", "A", True),
        ("A > Bc", "A > B", False),  # segment prefix, not string prefix
        ("A > B", "A > B > C", False),  # the chunk is above the support
        ("A", "A > B", False),
        ("X > A > B", "A > B", False),  # prefix, not infix
        ("a > b", "A > B", False),  # case-sensitive
        ("A > B", "", True),  # a whole-file support matches every chunk of the file
        ("", "A", False),
    ],
)
def test_segments_start_with(chunk, support, expected):
    assert segments_start_with(heading_segments(chunk), heading_segments(support)) is expected
    assert anchor_matches("f.md", heading_segments(chunk), "f.md", heading_segments(support)) is expected


def test_anchor_matches_requires_equal_rel_path():
    segs = heading_segments("A > B")
    assert anchor_matches("work/a.md", segs, "work/a.md", segs)
    assert not anchor_matches("work/b.md", segs, "work/a.md", segs)
    assert not anchor_matches("Work/a.md", segs, "work/a.md", segs)  # case-sensitive path


def test_anchor_matches_with_differently_spelt_headings():
    # 'A/B' (no '>') and ' A >  B ' are the same heading path after normalisation
    assert anchor_matches("f.md", heading_segments(" A >  B > C"), "f.md", heading_segments("A/B"))
    assert anchor_matches("f.md", heading_segments("# A ## B ### C"), "f.md", heading_segments("A > B"))


# ---- snippet matching ------------------------------------------------------------------------


def test_fold_text_is_whitespace_folded_and_case_insensitive():
    assert fold_text("  We  run\n\tPOSTGRES   16. ") == "we run postgres 16."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We run Postgres 16 in production.", True),
        ("We run POSTGRES\n   16 in production.", True),  # case and whitespace folded
        ("we run postgres\t16", True),
        ("We run Postgres 15.", False),
        ("Postgres16", False),  # whitespace is folded, not removed
        ("", False),
    ],
)
def test_snippet_required(text, expected):
    segs = heading_segments("Atlas > Database")
    got = anchor_matches(
        "work/atlas.md",
        segs,
        "work/atlas.md",
        segs,
        chunk_text=text,
        snippets=["Postgres  16"],
        require_snippets=True,
    )
    assert got is expected


CAFE_NFC = "Caf\u00e9"  # precomposed é
CAFE_NFD = "Cafe\u0301"  # e + combining acute accent


@pytest.mark.parametrize(
    ("snippet", "text"),
    [
        (CAFE_NFC, f"Lunch at the {CAFE_NFD} on Monday."),
        (CAFE_NFD, f"Lunch at the {CAFE_NFC} on Monday."),
        ("CAF\u00c9", f"lunch at the {CAFE_NFD.lower()}"),  # case folded as well
        ("\u212b ngstr\u00f6m", "A\u030a ngstro\u0308m"),  # Å (angstrom sign) vs A + ring: NFC makes both Å
    ],
)
def test_snippet_matching_is_unicode_normalised_on_both_sides(snippet, text):
    segs = ("Notes",)
    assert fold_text(snippet) in fold_text(text)
    assert anchor_matches("n.md", segs, "n.md", segs, chunk_text=text, snippets=[snippet], require_snippets=True)


def test_unicode_normalisation_keeps_different_letters_apart():
    """NFC, not NFKC and not accent stripping: 'Cafe' is not 'Café', 'x²' is not 'x2'."""
    segs = ("Notes",)
    kw = {"require_snippets": True}
    assert not anchor_matches("n.md", segs, "n.md", segs, chunk_text="the Cafe", snippets=[CAFE_NFC], **kw)
    assert not anchor_matches("n.md", segs, "n.md", segs, chunk_text="area x\u00b2", snippets=["x2"], **kw)


def test_snippet_normalisation_end_to_end_moves_the_versions():
    from raglake.anchors import ANCHOR_RULE_VERSION
    from raglake.metrics.registry import get_metric

    case = _case({"rel_path": "n.md", "heading_path": "Notes", "snippets": [CAFE_NFC]})
    cap = _capture({"rel_path": "n.md", "heading_path": "Notes", "text": f"the {CAFE_NFD}"})
    assert score_one(case, cap, "recall_any_at_k", require_snippets=True).value == 1.0
    assert ANCHOR_RULE_VERSION == "3"  # 3 (anchors normalised once) left the metrics' rule, and versions, as they were
    for name in ("recall_any_at_k", "recall_all_at_k", "mrr_at_k", "precision_at_k", "ndcg_at_k"):
        assert get_metric(name).version == "2", name  # a snippet match can change their values


def test_snippet_any_of_several_suffices():
    segs = ("Atlas",)
    kw = dict(snippets=["MySQL", "postgres 16"], require_snippets=True)
    assert anchor_matches("a.md", segs, "a.md", segs, chunk_text="Postgres 16 it is", **kw)
    assert not anchor_matches("a.md", segs, "a.md", segs, chunk_text="SQLite", **kw)


def test_snippets_ignored_without_require_snippets():
    segs = ("Atlas", "Database")
    assert anchor_matches("a.md", segs, "a.md", segs, chunk_text="nothing here", snippets=["Postgres 16"])
    assert anchor_matches(
        "a.md", segs, "a.md", segs, chunk_text="nothing here", snippets=["Postgres 16"], require_snippets=False
    )


def test_require_snippets_without_snippets_matches_on_anchor():
    segs = ("Atlas",)
    assert anchor_matches("a.md", segs, "a.md", segs, chunk_text="anything", snippets=[], require_snippets=True)


def test_snippet_does_not_rescue_a_wrong_anchor():
    assert not anchor_matches(
        "a.md",
        ("Other",),
        "a.md",
        ("Atlas",),
        chunk_text="Postgres 16",
        snippets=["Postgres 16"],
        require_snippets=True,
    )


# ---- the same rules end to end, through the schemas and a metric -------------------------------


def _case(support: dict) -> GoldenCase:
    return GoldenCase.model_validate({"id": "a1", "question": "q?", "gold_supports": [support]})


def _capture(*chunks: dict) -> Capture:
    return Capture.model_validate(
        {
            "case_id": "a1",
            "answer": "an answer",
            "retrieved": [dict(rank=i, **c) for i, c in enumerate(chunks, start=1)],
        }
    )


@pytest.mark.parametrize(
    ("chunk", "expected"),
    [
        ({"rel_path": ".\\work\\atlas.md", "heading_path": "Atlas>Database>Version"}, 1.0),
        ({"rel_path": "./work/atlas.md", "heading_path": "Atlas / Database"}, 1.0),
        ({"rel_path": "work/atlas.md", "heading_path": "Atlas > Databases"}, 0.0),
        ({"rel_path": "work/atlas.md", "heading_path": "atlas > database"}, 0.0),
        ({"rel_path": "work/other.md", "heading_path": "Atlas > Database"}, 0.0),
    ],
)
def test_end_to_end_normalised_matching(chunk, expected):
    case = _case({"rel_path": "work/atlas.md", "heading_path": "Atlas  >  Database"})
    s = score_one(case, _capture(chunk), "recall_any_at_k")
    assert (s.status, s.value) == ("ok", expected)


def test_end_to_end_require_snippets():
    case = _case({"rel_path": "work/atlas.md", "heading_path": "Atlas > Database", "snippets": ["postgres 16"]})
    without = _capture({"rel_path": "work/atlas.md", "heading_path": "Atlas > Database", "text": "We use MySQL."})
    with_snip = _capture(
        {"rel_path": "work/atlas.md", "heading_path": "Atlas > Database", "text": "We run\nPOSTGRES 16."}
    )
    assert score_one(case, without, "recall_any_at_k", require_snippets=False).value == 1.0
    assert score_one(case, without, "recall_any_at_k", require_snippets=True).value == 0.0
    assert score_one(case, with_snip, "recall_any_at_k", require_snippets=True).value == 1.0


# ---- path_under_folder -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel_path", "folder", "expected"),
    [
        ("work/projects/a.md", "work/projects", True),
        ("work/projects/a.md", "work", True),
        ("work/projects/a.md", "work/", True),
        ("work/projects/a.md", "./work/projects", True),
        ("work/projects/a.md", "work\\projects", True),
        ("work/projects/a.md", "work/proj", False),  # folder boundary, not string prefix
        ("work/projects/a.md", "personal", False),
        ("work/projects/a.md", "projects", False),  # must be a prefix of the path
        ("workshop/a.md", "work", False),
        ("work/projects/a.md", "Work", False),
    ],
)
def test_path_under_folder(rel_path, folder, expected):
    assert path_under_folder(rel_path, folder) is expected


# ---- the memoised normalisers (validating a file record by record calls them for every heading and path)


_HEADINGS = st.one_of(
    st.text(alphabet=st.sampled_from("ab >/#\t\u00e9"), max_size=12),
    st.lists(
        st.one_of(st.text(alphabet=st.sampled_from("ab >/#"), max_size=6), st.integers(-2, 2), st.booleans()),
        max_size=4,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_HEADINGS, min_size=1, max_size=6))
def test_heading_segments_memoised_equal_the_plain_split_in_any_order(paths):
    """Whatever was asked before (1, 1.0 and True are equal keys of a dict), each answer is the one the
    unmemoised rule gives: the list joined with ' > ' after str() of each heading, then split."""
    for path in paths:
        text = path if isinstance(path, str) else " > ".join(str(p) for p in path)
        assert heading_segments(path) == _split_heading_uncached(text)


def test_heading_segments_of_numbers_are_their_text_whatever_came_first():
    assert heading_segments([True]) == ("True",)
    assert heading_segments([1]) == ("1",)
    assert heading_segments(["1"]) == ("1",)
    assert heading_segments([1.0]) == ("1.0",)


def test_long_headings_and_paths_are_normalised_without_the_cache():
    long = "A " * 600 + "> B"
    assert heading_segments(long) == ("A " * 599 + "A", "B")
    assert normalise_rel_path(" ./" + "x/" * 600) == "x/" * 600
    assert normalise_rel_path(None) == ""


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet=st.sampled_from("a./\\ "), max_size=10)), min_size=1))
def test_normalise_rel_path_memoised_equals_the_plain_rule(paths):
    for path in paths:
        assert normalise_rel_path(path) == _rel_path_uncached(path)
