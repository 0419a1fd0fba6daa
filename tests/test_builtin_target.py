"""The builtin target end to end with the REAL packaged MiniLM model, on a small corpus written here:
spec parsing, the index manifest and coverage rows, index_version, the on-disk vector cache,
retrieval with folder scoping and fallback, extractive answers with citations, abstention and
latencies. The model is loaded once per module (about 10 s, offline)."""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from raglake.anchors import path_under_folder
from raglake.builtin.chunker import ChunkSettings
from raglake.builtin.index import build_index
from raglake.builtin.rag import NO_ANSWER, RagSettings
from raglake.embed.cache import EmbeddingCache, TextEncoder
from raglake.embed.encoders import get_embedder
from raglake.embed.model import Embedder, weights_hash
from raglake.errors import ConfigError, UnknownNameError
from raglake.golden import GoldenSet
from raglake.lake.store import Lake
from raglake.metrics.context import CaseContext, ScoringConfig
from raglake.metrics.registry import get_metric
from raglake.schemas import Capture, GoldenCase
from raglake.targets import make_target
from raglake.targets.builtin import BuiltinTarget

# ---------------------------------------------------------------------------------------------
# the corpus: two vaults (work, home), two folders each

_PEOPLE = [
    ("Ana", "Ben"),
    ("Ben", "Chen"),
    ("Chen", "Dana"),
    ("Dana", "Eli"),
    ("Eli", "Fay"),
    ("Fay", "Gus"),
    ("Gus", "Hal"),
    ("Hal", "Ivy"),
    ("Ivy", "Jo"),
    ("Jo", "Kai"),
    ("Kai", "Lee"),
    ("Lee", "Ana"),
] * 2
ROTATION_WEEKS = "\n".join(
    f"- Week {i}: engineer {name} covers the pager from Monday 09:00 until the next Monday 09:00, "
    f"with {backup} as the secondary."
    for i, (name, backup) in enumerate(_PEOPLE, start=1)
)

NOTES = {
    "work/projects/atlas.md": """---
title: Atlas
owner: platform
---
# Atlas

## Goals
Atlas moves the billing database from MySQL to PostgreSQL before the end of the third quarter.
The cutover happens during a weekend maintenance window with read-only mode enabled.

### Risks
Replication lag during the data copy could leave invoices out of date for a few hours.

## Timeline
Schema conversion in July, dual writes in August, cutover in September.
""",
    "work/projects/beacon.md": """# Beacon

## Overview
Beacon is the mobile push notification service that sends alerts to iOS and Android phones.
It batches messages and retries failed deliveries three times with exponential backoff.

## Open questions
Should marketing messages use a separate queue from transactional alerts?
""",
    "work/oncall/db-failover.md": """# Database failover runbook

## Steps
Promote the standby replica with the failover script, then point the connection pooler at the new primary.
Confirm that writes succeed before closing the incident.

## Rollback
If the new primary misbehaves, demote it and restore traffic to the old primary from the latest snapshot.
""",
    # a long section: split into parts by the token budget
    "work/oncall/rotation.md": (
        "# On-call rotation 2024\n\n## Schedule\n"
        + ROTATION_WEEKS
        + "\n\n## Swaps\nSwaps need a week of notice in the team channel.\n"
    ),
    "work/oncall/empty.md": "",
    "home/recipes/sourdough.md": """# Sourdough bread

## Ingredients
Five hundred grams of bread flour, three hundred fifty grams of water, one hundred grams of starter and ten grams of salt.

## Method
Mix the dough, let it rest for an hour, fold it every thirty minutes, then bake it in a covered pot at 250 degrees.
""",
    "home/recipes/draft.md": "---\ntitle: Pancakes\nstatus: idea\n---\n",
    "home/garden/tomatoes.md": """Tomato notes

# Tomatoes

## Watering
Water the tomato plants deeply twice a week in the morning, and more often during a heatwave.
Keep the leaves dry to avoid blight.

## Pests
Aphids and hornworms are the main pests; pick hornworms off by hand and spray aphids with soapy water.
""",
}
OTHER_FILES = {
    "home/garden/seed-list.txt": b"tomato, basil, chili\n",
    "work/projects/scan.pdf": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n",
}
FOLDERS = {"work/projects", "work/oncall", "home/recipes", "home/garden"}

# every chunk but the parts of the long Schedule section
WHOLE_CHUNKS = {
    ("home/garden/tomatoes.md", ()),
    ("home/garden/tomatoes.md", ("Tomatoes", "Watering")),
    ("home/garden/tomatoes.md", ("Tomatoes", "Pests")),
    ("home/recipes/sourdough.md", ("Sourdough bread", "Ingredients")),
    ("home/recipes/sourdough.md", ("Sourdough bread", "Method")),
    ("work/oncall/db-failover.md", ("Database failover runbook", "Steps")),
    ("work/oncall/db-failover.md", ("Database failover runbook", "Rollback")),
    ("work/oncall/rotation.md", ("On-call rotation 2024", "Swaps")),
    ("work/projects/atlas.md", ("Atlas", "Goals")),
    ("work/projects/atlas.md", ("Atlas", "Goals", "Risks")),
    ("work/projects/atlas.md", ("Atlas", "Timeline")),
    ("work/projects/beacon.md", ("Beacon", "Overview")),
    ("work/projects/beacon.md", ("Beacon", "Open questions")),
}
SCHEDULE = ("work/oncall/rotation.md", ("On-call rotation 2024", "Schedule"))
EMPTY_SECTIONS = 6  # the H1 of every note with headings holds no text of its own

# questions that paraphrase one section (few shared words), and the section
PARAPHRASES = [
    (
        "q-water",
        "How frequently do my tomato plants need irrigating?",
        "home/garden/tomatoes.md",
        ("Tomatoes", "Watering"),
    ),
    (
        "q-pests",
        "What bugs attack the tomatoes and how do I get rid of them?",
        "home/garden/tomatoes.md",
        ("Tomatoes", "Pests"),
    ),
    ("q-flour", "How much flour goes into the bread?", "home/recipes/sourdough.md", ("Sourdough bread", "Ingredients")),
    (
        "q-push",
        "Which system delivers mobile alerts and how does it retry?",
        "work/projects/beacon.md",
        ("Beacon", "Overview"),
    ),
    (
        "q-lag",
        "What happens if replication falls behind while copying the billing data?",
        "work/projects/atlas.md",
        ("Atlas", "Goals", "Risks"),
    ),
]
UNANSWERABLE = ("q-none", "What is the capital of Mongolia?")


def write_corpus(root: Path) -> Path:
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    for rel, data in OTHER_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def files_on_disk(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def cases(*pairs: tuple[str, str]) -> list[GoldenCase]:
    return [GoldenCase(id=i, question=q) for i, q in pairs]


PARAPHRASE_CASES = cases(*[(i, q) for i, q, _, _ in PARAPHRASES])


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    e = get_embedder()
    _ = e.model  # load once for the module
    return e


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def lake_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("lake"))


def target(corpus: Path, lake_url: str, query: str = "") -> BuiltinTarget:
    t = make_target(f"builtin:{corpus.as_posix()}" + (f"?{query}" if query else ""), Lake(lake_url))
    assert isinstance(t, BuiltinTarget)
    return t


@pytest.fixture(scope="module")
def default_target(embedder: Embedder, corpus: Path, lake_url: str) -> BuiltinTarget:
    return target(corpus, lake_url)


def golden() -> GoldenSet:
    return GoldenSet("g", "g.jsonl", PARAPHRASE_CASES, "0" * 16)


# ---------------------------------------------------------------------------------------------
# the target spec


def test_spec_without_a_folder_uses_the_default_corpus_and_settings(tmp_path: Path) -> None:
    t = make_target("builtin", Lake(str(tmp_path / "lake")))
    assert isinstance(t, BuiltinTarget)
    assert t.corpus == Path("data/corpus") and t.spec == "builtin:data/corpus" and t.name == "builtin"
    assert t.rag_settings == RagSettings() and t.chunk_settings == ChunkSettings()
    t2 = make_target("builtin?folder_mode=off", Lake(str(tmp_path / "lake")))
    assert t2.corpus == Path("data/corpus") and t2.rag_settings.folder_mode == "off"


def test_spec_with_a_folder_and_options(corpus: Path, tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    plain = make_target(f"builtin:{corpus}", lake)
    assert plain.corpus == corpus and plain.rag_settings == RagSettings() and plain.name == "builtin"
    t = make_target(f"builtin:{corpus}?folder_mode=off&top_k=3", lake)
    assert t.corpus == corpus
    assert t.rag_settings == RagSettings(folder_mode="off", top_k=3) and t.chunk_settings == ChunkSettings()
    assert t.spec == f"builtin:{corpus.as_posix()}?folder_mode=off&top_k=3"
    assert t.name != "builtin" and "top_k-3" in t.name
    c = make_target(f"builtin:{corpus}?max_tokens=120&overlap_tokens=20&abstain_below=0.3", lake)
    assert c.chunk_settings == ChunkSettings(max_tokens=120, overlap_tokens=20)
    assert c.rag_settings.abstain_below == 0.3


@pytest.mark.parametrize(
    ("option", "meant"),
    [("top_kk=3", "top_k"), ("folder_mod=on", "folder_mode"), ("abstain_bellow=0.2", "abstain_below")],
)
def test_unknown_option_says_did_you_mean(corpus: Path, tmp_path: Path, option: str, meant: str) -> None:
    with pytest.raises(UnknownNameError, match=f"did you mean '{meant}'"):
        make_target(f"builtin:{corpus}?{option}", Lake(str(tmp_path / "lake")))


@pytest.mark.parametrize(
    "option",
    [
        "top_k=three",
        "abstain_below=high",
        "folder_mode=sideways",
        "top_k=0",
        "max_tokens=8",
        "overlap_tokens=150",
        "folders=1.5",
    ],
)
def test_bad_option_value_is_a_config_error(corpus: Path, tmp_path: Path, option: str) -> None:
    with pytest.raises(ConfigError) as info:
        make_target(f"builtin:{corpus}?{option}", Lake(str(tmp_path / "lake")))
    assert not isinstance(info.value, UnknownNameError)


def test_missing_corpus_folder_fails_check(embedder: Embedder, tmp_path: Path) -> None:
    t = make_target(f"builtin:{tmp_path / 'no-such-corpus'}", Lake(str(tmp_path / "lake")))  # lazy: no error yet
    with pytest.raises(ConfigError, match="does not exist"):
        t.check(golden())


def test_check_passes_on_an_existing_corpus(default_target: BuiltinTarget) -> None:
    default_target.check(golden())


# ---------------------------------------------------------------------------------------------
# the index manifest and coverage


def test_manifest_counts_match_the_files_on_disk(
    default_target: BuiltinTarget, corpus: Path, embedder: Embedder
) -> None:
    m = default_target.manifest()
    stats = m.stats()
    on_disk = files_on_disk(corpus)
    markdown = [p for p in on_disk if p.endswith(".md")]
    assert len(on_disk) == 10 and len(markdown) == 8
    assert stats["docs_seen"] == len(on_disk)
    assert stats["docs_processed"] == len(markdown)
    assert stats["docs_skipped"] == len(on_disk) - len(markdown)
    assert stats["docs_with_zero_chunks"] == 2
    reasons = {d.rel_path: d.reason for d in m.docs}
    assert reasons == {p: None for p in on_disk} | {
        "home/garden/seed-list.txt": "unsupported_type",
        "work/projects/scan.pdf": "unsupported_type",
        "work/oncall/empty.md": "empty_file",
        "home/recipes/draft.md": "front_matter_only",
    }
    assert {d.rel_path: d.status for d in m.docs if d.status != "indexed"} == {
        "home/garden/seed-list.txt": "skipped",
        "work/projects/scan.pdf": "skipped",
        "work/oncall/empty.md": "no_chunks",
        "home/recipes/draft.md": "no_chunks",
    }
    assert {d.rel_path: d.doc_type for d in m.docs} == {p: "." + p.rsplit(".", 1)[1] for p in on_disk}

    chunks = default_target._ensure().index.chunks
    anchors = [(c.rel_path, c.heading_path) for c in chunks]
    assert set(anchors) - {SCHEDULE} == WHOLE_CHUNKS and len(anchors) == len(set(anchors)) + anchors.count(SCHEDULE) - 1
    schedule_parts = [c.part for c in chunks if (c.rel_path, c.heading_path) == SCHEDULE]
    assert len(schedule_parts) >= 2 and schedule_parts == list(range(1, len(schedule_parts) + 1))
    assert stats["chunks_embedded"] == len(chunks) == len(WHOLE_CHUNKS) + len(schedule_parts)
    assert m.skipped_by_reason == {"empty_section": EMPTY_SECTIONS} and stats["chunks_skipped"] == EMPTY_SECTIONS
    assert stats["chunks_attempted"] == stats["chunks_embedded"] + stats["chunks_skipped"]
    assert sum(d.n_chunks for d in m.docs) == stats["chunks_embedded"]
    assert sum(d.n_skipped for d in m.docs) == stats["chunks_skipped"]

    tokens = [c.n_tokens for c in chunks]
    assert tokens == embedder.count_tokens([c.embed_text for c in chunks]) == m.token_counts
    assert max(tokens) <= ChunkSettings().max_tokens <= embedder.max_sequence
    assert stats["tokens_per_chunk_min"] == min(tokens) and stats["tokens_per_chunk_max"] == max(tokens)
    assert stats["tokens_per_chunk_min"] <= stats["tokens_per_chunk_mean"] <= stats["tokens_per_chunk_max"]
    assert stats["tokens_per_chunk_mean"] == pytest.approx(sum(tokens) / len(tokens))
    assert stats["tokens_per_chunk_min"] <= stats["tokens_per_chunk_p95"] <= stats["tokens_per_chunk_max"]
    assert m.chunker_version and m.embedding_model == embedder.key and m.settings == asdict(ChunkSettings())


def test_coverage_rows_are_consistent_with_stats(default_target: BuiltinTarget) -> None:
    m = default_target.manifest()
    cols = m.coverage_columns()
    n = len(cols["stat"])
    assert n > 0 and {len(v) for v in cols.values()} == {n}
    assert set(cols["index_version"]) == {m.index_version}
    rows = list(zip(cols["stat"], cols["doc_type"], cols["reason"], cols["value"]))
    overall = {s: v for s, t, r, v in rows if t is None and r is None}
    assert overall == {k: float(v) for k, v in m.stats().items() if v is not None}
    by_reason = {(s, r): v for s, t, r, v in rows if r is not None}
    assert by_reason == {
        ("chunks_skipped", "empty_section"): float(EMPTY_SECTIONS),
        ("docs_not_indexed", "unsupported_type"): 2.0,
        ("docs_not_indexed", "empty_file"): 1.0,
        ("docs_not_indexed", "front_matter_only"): 1.0,
    }
    by_type = {(s, t): v for s, t, r, v in rows if t is not None}
    assert {t for _, t in by_type} == {".md", ".txt", ".pdf"}
    assert (by_type[("docs", ".md")], by_type[("docs", ".txt")], by_type[("docs", ".pdf")]) == (8.0, 1.0, 1.0)
    assert by_type[("docs_with_chunks", ".md")] == 6.0 and by_type[("docs_with_chunks", ".txt")] == 0.0
    stats = m.stats()
    assert sum(v for (s, _), v in by_type.items() if s == "docs") == stats["docs_seen"]
    assert sum(v for (s, _), v in by_type.items() if s == "chunks_embedded") == stats["chunks_embedded"]
    assert sum(v for (s, _), v in by_type.items() if s == "chunks_skipped") == stats["chunks_skipped"]
    assert m.info()["index_version"] == m.index_version and m.info()["docs_seen"] == stats["docs_seen"]


def test_index_version_is_stable_and_changes_with_content_and_chunk_settings(
    default_target: BuiltinTarget, corpus: Path, lake_url: str, tmp_path: Path
) -> None:
    first = default_target.manifest().index_version
    again = target(corpus, lake_url)
    assert again.manifest().index_version == first and len(first) == 16
    assert again.content_key() == default_target.content_key()

    copy = Path(shutil.copytree(corpus, tmp_path / "corpus"))
    assert target(copy, lake_url).manifest().index_version == first  # same paths and bytes, other folder
    note = copy / "work/projects/beacon.md"
    note.write_bytes(note.read_bytes() + b" ")  # one byte more
    changed = target(copy, lake_url)
    assert changed.manifest().index_version != first
    assert changed.content_key() != default_target.content_key()

    for query in ("max_tokens=120", "overlap_tokens=10"):
        assert target(corpus, lake_url, query).manifest().index_version != first, query
    # a retrieval-only setting does not change the index, only the content key
    scoped = target(corpus, lake_url, "top_k=3")
    assert scoped.manifest().index_version == first and scoped.content_key() != default_target.content_key()


def test_chunks_over_the_model_max_sequence_are_skipped(corpus: Path, lake_url: str, embedder: Embedder) -> None:
    """With a budget above the model's limit, the long section becomes one chunk too long to embed."""
    t = target(corpus, lake_url, "max_tokens=2000")
    m = t.manifest()
    assert m.skipped_by_reason == {"empty_section": EMPTY_SECTIONS, "over_max_sequence": 1}
    chunks = t._ensure().index.chunks
    assert SCHEDULE not in {(c.rel_path, c.heading_path) for c in chunks}
    assert {(c.rel_path, c.heading_path) for c in chunks} == WHOLE_CHUNKS
    assert all(c.n_tokens <= embedder.max_sequence for c in chunks)
    assert m.stats()["chunks_attempted"] == len(WHOLE_CHUNKS) + EMPTY_SECTIONS + 1
    rotation = next(d for d in m.docs if d.rel_path == "work/oncall/rotation.md")
    assert (rotation.status, rotation.n_chunks, rotation.n_skipped) == ("indexed", 1, 2)


def test_known_docs_are_the_manifest_doc_paths(default_target: BuiltinTarget, corpus: Path) -> None:
    assert default_target.known_docs() == default_target.manifest().doc_paths == frozenset(files_on_disk(corpus))


# ---------------------------------------------------------------------------------------------
# the vector cache


class SpyEmbedder:
    """The real embedder, recording what the model is asked to encode."""

    def __init__(self, inner: Embedder):
        self.inner, self.encoded = inner, []

    def encode(self, texts):  # noqa: ANN001, ANN201
        self.encoded.extend(texts)
        return self.inner.encode(texts)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)


def test_second_build_encodes_nothing_and_a_changed_note_reencodes_only_its_chunks(
    embedder: Embedder, corpus: Path, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(corpus, tmp_path / "corpus"))
    cache_root = tmp_path / "vectors"
    settings = ChunkSettings()

    def build(spy: SpyEmbedder):  # noqa: ANN202
        encoder = TextEncoder(spy, EmbeddingCache(cache_root, embedder.key))  # type: ignore[arg-type]
        return build_index(copy, encoder, settings), encoder

    spy1 = SpyEmbedder(embedder)
    first, enc1 = build(spy1)
    distinct = {c.embed_text for c in first.chunks}
    assert enc1.stats.encoded == len(distinct) == len(spy1.encoded) and enc1.stats.by_caller == {"index": len(distinct)}

    spy2 = SpyEmbedder(embedder)
    second, enc2 = build(spy2)  # a new encoder and a new cache object over the same folder
    assert enc2.stats.encoded == 0 and enc2.stats.by_caller == {"index": 0} and spy2.encoded == []
    assert enc2.stats.cached == len(distinct)
    assert np.allclose(second.vectors, first.vectors, atol=1e-6)
    assert second.manifest.index_version == first.manifest.index_version

    note = copy / "home/garden/tomatoes.md"
    note.write_text(
        note.read_text().replace("twice a week", "three times a week").replace("soapy water", "neem oil"),
        encoding="utf-8",
    )
    spy3 = SpyEmbedder(embedder)
    third, enc3 = build(spy3)
    new_texts = {c.embed_text for c in third.chunks} - distinct
    assert len(new_texts) == 2  # Watering and Pests changed; the preamble did not
    assert set(spy3.encoded) == new_texts and enc3.stats.encoded == 2
    assert {c.rel_path for c in third.chunks if c.embed_text in new_texts} == {"home/garden/tomatoes.md"}
    assert third.manifest.index_version != first.manifest.index_version
    # vectors of unchanged chunks come back from the cache unchanged
    old = {c.embed_text: v for c, v in zip(first.chunks, first.vectors)}
    for c, v in zip(third.chunks, third.vectors):
        if c.embed_text in old:
            assert np.allclose(v, old[c.embed_text], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# retrieval, folder scoping, answers, abstention, latencies


def _check_capture(capture: Capture, top_k: int) -> None:
    assert Capture.model_validate(capture.model_dump()) == capture
    ranks = [c.rank for c in capture.retrieved]
    scores = [c.score for c in capture.retrieved]
    assert 0 < len(ranks) <= top_k and ranks == list(range(1, len(ranks) + 1))
    assert all(a >= b for a, b in zip(scores, scores[1:])), scores
    assert capture.method == "builtin_dense" and capture.status == "ok"
    assert len({c.chunk_id for c in capture.retrieved}) == len(ranks)


def test_paraphrase_retrieves_its_section_at_rank_1(corpus: Path, lake_url: str) -> None:
    t = target(corpus, lake_url, "folder_mode=off&top_k=5")
    captures = t.capture(PARAPHRASE_CASES)
    assert [c.case_id for c in captures] == [i for i, *_ in PARAPHRASES]
    for capture, (_, question, rel_path, heading) in zip(captures, PARAPHRASES):
        _check_capture(capture, 5)
        top = capture.retrieved[0]
        assert (top.rel_path, top.heading_path) == (rel_path, heading), question
        assert len(capture.retrieved) == 5 and capture.selected_folders == [] and capture.folder_mode == "off"


def test_folder_mode_on_restricts_retrieval_to_the_selected_folders(corpus: Path, lake_url: str) -> None:
    t = target(corpus, lake_url, "folder_mode=on&folders=1&top_k=20")
    index = t._ensure().index
    assert set(index.folders) == FOLDERS
    captures = t.capture(PARAPHRASE_CASES)
    for capture, (_, question, rel_path, heading) in zip(captures, PARAPHRASES):
        _check_capture(capture, 20)
        assert capture.folder_mode == "on" and len(capture.selected_folders) == 1
        (folder,) = capture.selected_folders
        assert folder == rel_path.rsplit("/", 1)[0], question
        assert all(path_under_folder(c.rel_path, folder) for c in capture.retrieved)
        assert len(capture.retrieved) == len(index.folders[folder]) < len(index.chunks)
        assert (capture.retrieved[0].rel_path, capture.retrieved[0].heading_path) == (rel_path, heading)
    # two folders: still only chunks under them
    wide = target(corpus, lake_url, "folder_mode=on&top_k=20").capture(PARAPHRASE_CASES)
    for capture in wide:
        assert len(capture.selected_folders) == 2 and set(capture.selected_folders) <= FOLDERS
        assert all(any(path_under_folder(c.rel_path, f) for f in capture.selected_folders) for c in capture.retrieved)


def test_scope_miss_is_computable_with_folder_scoping(corpus: Path, lake_url: str) -> None:
    scope_miss = get_metric("scope_miss").fn
    question = PARAPHRASES[0][1]  # tomatoes: the selector keeps home/garden
    inside = GoldenCase(
        id="in",
        question=question,
        gold_supports=[{"rel_path": "home/garden/tomatoes.md", "heading_path": "Tomatoes > Watering"}],
    )
    outside = GoldenCase(
        id="out",
        question=question,
        gold_supports=[{"rel_path": "work/oncall/db-failover.md", "heading_path": "Database failover runbook"}],
    )
    on = target(corpus, lake_url, "folder_mode=on&folders=1")
    cap_in, cap_out = on.capture([inside, outside])
    assert cap_in.selected_folders == ["home/garden"]
    assert scope_miss(CaseContext(inside, cap_in, ScoringConfig())).value == 0.0
    assert scope_miss(CaseContext(outside, cap_out, ScoringConfig())).value == 1.0
    (cap_off,) = target(corpus, lake_url, "folder_mode=off").capture([inside])
    result = scope_miss(CaseContext(inside, cap_off, ScoringConfig()))
    assert result.status == "undefined" and result.reason == "folder_mode_off"


def test_on_with_fallback_searches_everything_when_the_scoped_best_is_low(corpus: Path, lake_url: str) -> None:
    everything = target(corpus, lake_url, "folder_mode=off&top_k=50").capture(PARAPHRASE_CASES)
    forced = target(corpus, lake_url, "folder_mode=on_with_fallback&folders=1&fallback_below=0.99&top_k=50")
    n_chunks = len(forced._ensure().index.chunks)
    for capture, whole in zip(forced.capture(PARAPHRASE_CASES), everything):
        _check_capture(capture, 50)
        assert capture.folder_mode == "on_with_fallback" and len(capture.selected_folders) == 1
        assert len(capture.retrieved) == n_chunks
        assert [c.chunk_id for c in capture.retrieved] == [c.chunk_id for c in whole.retrieved]
        assert not all(path_under_folder(c.rel_path, capture.selected_folders[0]) for c in capture.retrieved)
    never = target(corpus, lake_url, "folder_mode=on_with_fallback&folders=1&fallback_below=-1&top_k=50")
    for capture in never.capture(PARAPHRASE_CASES):
        (folder,) = capture.selected_folders
        assert all(path_under_folder(c.rel_path, folder) for c in capture.retrieved)
        assert len(capture.retrieved) < n_chunks


def test_high_threshold_abstains_on_every_case(corpus: Path, lake_url: str) -> None:
    t = target(corpus, lake_url, "abstain_below=0.99")
    captures = t.capture(PARAPHRASE_CASES + cases(UNANSWERABLE))
    assert len(captures) == len(PARAPHRASES) + 1
    for capture in captures:
        assert capture.abstained is True and capture.answer == NO_ANSWER == "I could not find this in the notes."
        assert capture.references == [] and capture.status == "ok"


def test_default_threshold_abstains_on_an_unanswerable_question_only(default_target: BuiltinTarget) -> None:
    answerable, unanswerable = default_target.capture(cases(PARAPHRASES[0][:2], UNANSWERABLE))
    assert answerable.abstained is False and answerable.answer != NO_ANSWER
    assert unanswerable.abstained is True and unanswerable.answer == NO_ANSWER


def test_answer_cites_ranks_listed_in_references(corpus: Path, lake_url: str) -> None:
    t = target(corpus, lake_url, "abstain_below=0&folder_mode=off")
    for capture in t.capture(PARAPHRASE_CASES + cases(UNANSWERABLE)):
        _check_capture(capture, RagSettings().top_k)
        assert capture.abstained is False and capture.answer and capture.answer != NO_ANSWER
        pieces = re.findall(r"(.+?) \[(\d+)\](?: |$)", capture.answer)
        assert pieces and " ".join(f"{s} [{n}]" for s, n in pieces) == capture.answer
        cited = sorted({int(n) for _, n in pieces})
        assert all(1 <= n <= len(capture.retrieved) for n in cited)
        assert [(r.rel_path, r.heading_path) for r in capture.references] == [
            (capture.retrieved[n - 1].rel_path, capture.retrieved[n - 1].heading_path) for n in cited
        ]
        for sentence, n in pieces:  # extractive: each sentence is in the chunk it cites
            assert sentence in capture.retrieved[int(n) - 1].text, (sentence, n)


def test_latencies_are_non_negative_and_total_is_the_sum_of_stages(default_target: BuiltinTarget) -> None:
    for capture in default_target.capture(PARAPHRASE_CASES + cases(UNANSWERABLE)):
        lat = capture.latency_ms
        stages = [lat.folder_selection, lat.retrieval, lat.generation]
        assert all(v is not None and v >= 0 for v in [*stages, lat.total, lat.wall]), lat
        assert lat.total == pytest.approx(sum(stages), abs=0.002)
        assert lat.wall + 0.002 >= lat.total
        assert lat.retrieval > 0  # the question's share of encoding time is in retrieval


def test_default_target_captures_validate(default_target: BuiltinTarget) -> None:
    index = default_target._ensure().index
    captures = default_target.capture(PARAPHRASE_CASES)
    for capture in captures:
        _check_capture(capture, RagSettings().top_k)
        assert capture.folder_mode == "on_with_fallback" and len(capture.selected_folders) == RagSettings().folders
        in_scope = sum(len(index.folders[f]) for f in capture.selected_folders)
        assert capture.retrieved[0].score >= RagSettings().fallback_below  # these questions need no fallback
        assert len(capture.retrieved) == min(RagSettings().top_k, in_scope)
        assert all(any(path_under_folder(c.rel_path, f) for f in capture.selected_folders) for c in capture.retrieved)
        for c in capture.retrieved:
            assert c.chunk_id.startswith(f"{c.rel_path}#{'/'.join(c.heading_path)}#")
    assert default_target.capture([]) == []


# ---------------------------------------------------------------------------------------------
# the embedder


def test_embedder_paraphrase_scores_above_unrelated_and_key_has_a_stable_weights_hash(
    embedder: Embedder, tmp_path: Path
) -> None:
    a, para, other = embedder.encode(
        [
            "The meeting was moved to Thursday afternoon.",
            "We rescheduled the meeting for Thursday after lunch.",
            "Tomatoes need plenty of sunlight.",
        ]
    )
    assert np.allclose([np.linalg.norm(v) for v in (a, para, other)], 1.0, atol=1e-5)
    assert float(a @ para) > float(a @ other) + 0.3

    one, two = Embedder(), Embedder()
    assert one.key == two.key == embedder.key
    assert re.fullmatch(r"sentence-transformers/all-MiniLM-L6-v2@[0-9a-f]{16}", one.key)
    assert one.key.endswith("@" + weights_hash(one.path))

    # the hash follows the weights' bytes (a stand-in model folder: nothing is loaded)
    fake = tmp_path / "fake-model"
    fake.mkdir()
    (fake / "config.json").write_text("{}")
    (fake / "model.safetensors").write_bytes(b"\x00" * 64)
    (fake / "README.md").write_text("about")
    before = Embedder(str(fake)).key
    (fake / "README.md").write_text("about, edited")
    assert Embedder(str(fake)).key == before
    (fake / "model.safetensors").write_bytes(b"\x00" * 63 + b"\x01")
    after = Embedder(str(fake)).key
    assert after != before and after.split("@")[0] == before.split("@")[0] == "fake-model"
    assert EmbeddingCache(tmp_path, before).folder != EmbeddingCache(tmp_path, after).folder
