"""Inputs of the embedding benchmark (benchmarks/embedding.py): seeded golden cases and captures "of the
sample style", built from the sample golden set and the sample corpus cut by raglake's own chunker.
See embedding.py's docstring for what they look like."""

from __future__ import annotations

import json
import random

from _common import ROOT

from raglake.schemas import Capture, GoldenCase
from raglake.text.sentences import split_sentences

GOLDEN = ROOT / "data" / "golden" / "sample.jsonl"
CORPUS = ROOT / "data" / "corpus"

ABSTAIN = (
    "I couldn't find that in your notes.",
    "I don't know; the notes don't say.",
    "There is nothing about this in the notes I can see.",
)
ANSWER_LEADS = ("", "", "", "According to the notes, ", "Yes: ", "From what I can see, ", "In short, ")
GOLDEN_VARIANTS = (
    "{q}",
    "{q}",
    "Quick question: {ql}",
    "{q} Please cite the note.",
    "From my notes: {ql}",
    "{qs}, according to my notes?",
    "Can you check this for me: {ql}",
)
REFERENCE_LEADS = ("", "", "", "Yes. ", "The notes say: ", "Per {title}: ", "According to {title}, ")
TOPIC_TEMPLATES = (
    "What does my note on {leaf} ({title}) say?",
    "Is it true that {s}?",
    "What was decided about {leaf} in {title}?",
    "Where do my notes mention that {s}?",
    "Can you summarise {leaf} from {title}?",
    "Do my notes confirm that {s}?",
    "What is the latest on {leaf}?",
    "Remind me: {s}?",
)


class Chunk:
    __slots__ = ("rel_path", "heading", "text", "sentences")

    def __init__(self, rel_path: str, heading: tuple[str, ...], text: str):
        self.rel_path, self.heading, self.text = rel_path, heading, text
        leaf = heading[-1] if heading else ""
        self.sentences = [
            s for s in split_sentences(text) if 25 <= len(s) <= 240 and s != leaf and not s.startswith("#")
        ]


def load_chunks(embedder, n_distinct: int, rng: random.Random) -> tuple[list[Chunk], int]:
    """The sample corpus cut by raglake's chunker (the texts a builtin target retrieves)."""
    from raglake.builtin.chunker import ChunkSettings, chunk_note

    chunks: list[Chunk] = []
    for path in sorted(CORPUS.rglob("*.md")):
        found, _ = chunk_note(
            path.relative_to(CORPUS).as_posix(),
            path.read_text(encoding="utf-8"),
            ChunkSettings(),
            embedder.count_tokens,
            embedder.max_sequence,
        )
        chunks.extend(Chunk(c.rel_path, c.heading_path, c.text) for c in found)
    available = len(chunks)
    chunks = [c for c in chunks if c.sentences]
    if len(chunks) > n_distinct:
        chunks = rng.sample(chunks, n_distinct)
    return chunks, available


def _lower_first(s: str) -> str:
    return s[:1].lower() + s[1:] if s[:2] != s[:2].upper() else s


def _as_clause(sentence: str) -> str:
    return _lower_first(sentence.rstrip(" .!?:;"))


def generate(
    n: int, n_chunks: int, chunks: list[Chunk], golden: list[dict], seed: int, id_prefix: str = "bench"
) -> tuple[list[dict], list[dict]]:
    """Raw golden-case and capture dicts (see the module docstring)."""
    rng = random.Random(seed)
    order = chunks[:]
    rng.shuffle(order)
    cum, total = [], 0.0
    for r in range(len(order)):  # a few chunks are retrieved for very many questions
        total += 1.0 / (r + 1) ** 0.7
        cum.append(total)
    by_note: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_note.setdefault(c.rel_path, []).append(c)
    by_anchor = {(c.rel_path, " > ".join(c.heading)): c for c in chunks}

    def popular() -> Chunk:
        return rng.choices(order, cum_weights=cum)[0]

    cases, captures = [], []
    seen_questions: set[str] = set()
    seen_references: set[str | None] = set()
    for i in range(n):
        cid = f"{id_prefix}-{i:06d}"
        case: dict = {"id": cid}
        if rng.random() < 0.1:  # one of the sample's questions (re-asked, with its reference)
            g = rng.choice(golden)
            q = g["question"]
            case["question"] = rng.choice(GOLDEN_VARIANTS).format(q=q, ql=_lower_first(q), qs=q.rstrip("?"))
            case["reference_answer"] = g.get("reference_answer")
            case["answerable"] = g.get("answerable", True)
            case["gold_supports"] = g.get("gold_supports", [])
            sup = case["gold_supports"][0] if case["gold_supports"] else None
            topic = by_anchor.get((sup["rel_path"], sup["heading_path"])) if sup else None
            topic = topic or popular()
            ref_sentences = split_sentences(case["reference_answer"] or "") or topic.sentences[:1]
        else:  # written from a topic chunk (any chunk: questions cover the corpus, hubs are retrieved)
            for _ in range(12):  # a golden set asks each question once: retry a duplicate
                topic = rng.choice(chunks)
                s = rng.choice(topic.sentences)
                title, leaf = (topic.heading[0], topic.heading[-1]) if topic.heading else ("my notes", "this")
                question = rng.choice(TOPIC_TEMPLATES).format(leaf=leaf, title=title, s=_as_clause(s))
                if question not in seen_questions:
                    break
            case["question"] = question
            for _ in range(12):
                start = rng.randrange(len(topic.sentences))
                ref_sentences = topic.sentences[start : start + rng.choice((1, 1, 2))]
                lead = rng.choice(REFERENCE_LEADS).format(title=title)
                body = " ".join(ref_sentences)
                reference = lead + (_lower_first(body) if lead.endswith(", ") else body)
                if reference not in seen_references:
                    break
            case["reference_answer"] = reference
            case["gold_supports"] = [
                {"rel_path": topic.rel_path, "heading_path": " > ".join(topic.heading), "required": True}
            ]
        seen_questions.add(case["question"])
        seen_references.add(case["reference_answer"])

        capture: dict = {"case_id": cid, "method": "bench", "status": "ok"}
        roll = rng.random()
        if roll < 0.03:
            capture["answer"], capture["abstained"] = rng.choice(ABSTAIN), True
        elif roll < 0.04:
            capture["answer"] = ""
        else:
            n_sent = rng.choices((1, 2, 3), weights=(0.45, 0.35, 0.2))[0]
            first = rng.choice(ref_sentences)
            parts = [rng.choice(ANSWER_LEADS) + (_lower_first(first) if rng.random() < 0.5 else first)]
            while len(parts) < n_sent:
                source = popular() if rng.random() < 0.15 else topic  # now and then an unsupported sentence
                parts.append(rng.choice(source.sentences))
            if rng.random() < 0.3:
                parts[-1] = parts[-1] + " [1]"
            capture["answer"], capture["abstained"] = " ".join(parts), False

        picked: list[Chunk] = []
        if rng.random() < 0.85:
            picked.append(topic)
        siblings = [c for c in by_note.get(topic.rel_path, []) if c is not topic]
        while len(picked) < n_chunks:
            c = rng.choice(siblings) if siblings and rng.random() < 0.4 else popular()
            if all(c is not p for p in picked):
                picked.append(c)
        if picked and picked[0] is topic:  # the topic chunk at rank 1-5
            picked.insert(min(rng.choice((0, 0, 0, 1, 1, 2, 3, 4)), n_chunks - 1), picked.pop(0))
        scores = sorted((rng.uniform(0.3, 0.9) for _ in picked), reverse=True)
        capture["retrieved"] = [
            {
                "rank": r + 1,
                "rel_path": c.rel_path,
                "heading_path": " > ".join(c.heading),
                "text": c.text,
                "score": round(s, 4),
            }
            for r, (c, s) in enumerate(zip(picked, scores))
        ]
        cases.append(case)
        captures.append(capture)
    return cases, captures


def build_pairs(cases: list[dict], captures: list[dict], via_json: bool = False) -> list[tuple[GoldenCase, Capture]]:
    if via_json:  # each string its own object, as when captures are read back from JSON lines
        return [
            (GoldenCase.model_validate_json(json.dumps(c)), Capture.model_validate_json(json.dumps(x)))
            for c, x in zip(cases, captures)
        ]
    return [(GoldenCase.model_validate(c), Capture.model_validate(x)) for c, x in zip(cases, captures)]


def read_golden() -> list[dict]:
    """The sample golden set's cases, as raw dicts."""
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_inputs(embedder, n: int, n_chunks: int, seed: int, distinct_chunks: int):
    rng = random.Random(seed)
    golden = read_golden()
    chunks, available = load_chunks(embedder, distinct_chunks, rng)
    cases, captures = generate(n, n_chunks, chunks, golden, seed)
    return cases, captures, golden, chunks, available
