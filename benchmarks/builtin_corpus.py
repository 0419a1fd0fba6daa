"""The synthetic corpus of benchmarks/builtin.py: seeded markdown notes (two vaults, a few subfolders,
front matter, an H1 with an intro and 3-8 nested sections of templated prose, some sections longer than
the chunk budget so they split) and questions drawn from the chunks."""

from __future__ import annotations

import random
from pathlib import Path

FOLDERS = {  # folder -> topic vocabulary key; '' is a note at the vault root
    "work/projects": "eng",
    "work/meetings": "meet",
    "work/oncall": "eng",
    "work/hiring": "meet",
    "work": "meet",
    "personal/travel": "travel",
    "personal/recipes": "food",
    "personal/finance": "money",
    "personal": "travel",
}
VOCAB = {
    "eng": dict(
        noun="service database migration pipeline dashboard cluster deploy rollback schema queue cache endpoint "
        "replica index alert runbook release branch API latency budget shard worker scheduler gateway".split(),
        verb="refactor migrate monitor deploy benchmark profile document review split merge archive "
        "throttle retry validate rotate upgrade".split(),
        adj="flaky slow critical legacy stable noisy partitioned read-only idle overloaded brittle "
        "experimental deprecated redundant".split(),
    ),
    "meet": dict(
        noun="agenda roadmap headcount interview candidate rubric offer retro standup budget quarter "
        "milestone risk decision proposal stakeholder review feedback deadline owner".split(),
        verb="approve postpone escalate schedule summarise assign revisit clarify prioritise draft "
        "circulate negotiate confirm".split(),
        adj="urgent tentative contested final quarterly cross-team senior junior open pending blocked "
        "optional mandatory".split(),
    ),
    "travel": dict(
        noun="train ferry hostel itinerary passport museum harbour valley trail visa booking luggage "
        "market cathedral village station border coast campsite".split(),
        verb="book cancel explore hike visit photograph rebook pack reserve cross wander".split(),
        adj="crowded scenic overnight cheap rainy remote coastal historic quiet delayed sunny".split(),
    ),
    "food": dict(
        noun="dough broth marinade oven skillet sourdough risotto spice garlic lentils stock pastry "
        "butter glaze sauce starter batch".split(),
        verb="knead simmer roast whisk fold season proof reduce braise chill toast".split(),
        adj="crispy tender smoky bitter fragrant silky dense tangy golden".split(),
    ),
    "money": dict(
        noun="mortgage invoice pension budget savings account dividend tax return receipt insurance "
        "premium allowance transfer deposit loan".split(),
        verb="file reconcile transfer cancel renew deduct claim invest audit consolidate".split(),
        adj="annual monthly fixed variable overdue deductible outstanding joint".split(),
    ),
}
NAMES = "Lena Jonas Elif Aisha Tomasz Marta Sven Olga Priya Mateo Ines Kofi Hana Bruno Yusuf Greta".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March April May June July August September October November December".split()
SECTION_TITLES = (
    "Background",
    "Goals",
    "Open questions",
    "Decisions",
    "Next steps",
    "Notes",
    "Risks",
    "Timeline",
    "Details",
    "Lessons",
    "Follow-up",
    "Summary",
    "Costs",
    "People",
    "Ideas",
)
TEMPLATES = (
    "The {adj} {noun} {past} the {noun2} after the review on {day}.",
    "We agreed to {verb} the {noun} before {month}, because the {noun2} was {adj}.",
    "{name} suggested that we {verb} the {adj} {noun} together with the {noun2}.",
    "Next step: {verb} the {noun} and ask {name} about the {adj} {noun2} by {day}.",
    "On {day} {date} {month} the {noun} turned out to be {adj} again, so {name} wrote it down.",
    "It took {num} minutes to {verb} the {noun}, which is longer than the {noun2} needs.",
    "I still do not know whether the {noun} should be {adj} or whether the {noun2} matters more.",
    "{name} and {name2} will {verb} the {noun} while I look at the {adj} {noun2}.",
    "The main lesson is that {a_adj} {noun} makes the {noun2} harder to {verb}.",
    "Compared with last {month}, the {noun} costs about {num} percent more and feels {adj}.",
    "Remember to {verb} the {noun2} first; otherwise the {noun} stays {adj} for weeks.",
    "According to {name}, the {adj} {noun} was the reason the {noun2} slipped to {month}.",
)


_IRREGULAR = {"split": "split", "cancel": "cancelled", "transfer": "transferred", "file": "filed"}


def _past(verb: str) -> str:
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    if verb.endswith("e"):
        return verb + "d"
    if verb.endswith("y") and verb[-2] not in "aeiou":
        return verb[:-1] + "ied"
    return verb + "ed"


def _sentence(rng: random.Random, v: dict) -> str:
    t = rng.choice(TEMPLATES)
    n1, n2 = rng.sample(v["noun"], 2)
    a, b = rng.sample(NAMES, 2)
    adj, verb = rng.choice(v["adj"]), rng.choice(v["verb"])
    s = t.format(
        adj=adj,
        a_adj=("an " if adj[0] in "aeiou" else "a ") + adj,
        noun=n1,
        noun2=n2,
        verb=verb,
        past=_past(verb),
        name=a,
        name2=b,
        day=rng.choice(DAYS),
        month=rng.choice(MONTHS),
        date=rng.randint(1, 28),
        num=rng.randint(2, 95),
    )
    return s[0].upper() + s[1:]


def _prose(rng: random.Random, v: dict, n_sentences: int) -> str:
    """Paragraphs of 2-5 sentences; now and then a short bullet list."""
    paragraphs, left = [], n_sentences
    while left > 0:
        k = min(left, rng.randint(2, 5))
        if rng.random() < 0.12:
            paragraphs.append("\n".join(f"- {_sentence(rng, v)}" for _ in range(k)))
        else:
            paragraphs.append(" ".join(_sentence(rng, v) for _ in range(k)))
        left -= k
    return "\n\n".join(paragraphs)


def _section_sentences(rng: random.Random) -> int:
    """Mostly short sections; about one in eight is longer than the 200-token budget (~22 tokens a sentence)."""
    r = rng.random()
    return rng.randint(1, 5) if r < 0.65 else rng.randint(6, 9) if r < 0.87 else rng.randint(11, 30)


def make_note(rng: random.Random, i: int, folder: str) -> str:
    v = VOCAB[FOLDERS[folder]]
    title = f"{rng.choice(v['adj']).capitalize()} {rng.choice(v['noun'])} {i:05d}"
    tags = ", ".join(sorted(set(rng.sample(v["noun"], 3))))
    lines = [
        "---",
        f"title: {title}",
        f"date: 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        f"tags: [{tags}]",
        "---",
        "",
        f"# {title}",
        "",
        _prose(rng, v, rng.randint(1, 3)),
    ]
    level = 1  # the first section is an H2
    for _ in range(rng.randint(3, 8)):
        level = rng.choice(range(2, min(level, 3) + 2))  # a sibling, a child (down to ####) or back up to ##
        heading = f"{rng.choice(SECTION_TITLES)} on the {rng.choice(v['adj'])} {rng.choice(v['noun'])}"
        lines += ["", f"{'#' * level} {heading}", "", _prose(rng, v, _section_sentences(rng))]
    return "\n".join(lines) + "\n"


def generate(root: Path, n_notes: int, seed: int) -> list[tuple[str, str]]:
    """Writes the notes under root; returns (rel_path, text) in sorted path order (as build_index reads)."""
    rng = random.Random(seed)
    folders = list(FOLDERS)
    notes = []
    for i in range(n_notes):
        folder = rng.choice(folders)
        rel = f"{folder}/note-{i:05d}.md"
        text = make_note(rng, i, folder)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        notes.append((rel, text))
    return sorted(notes)


def make_questions(rng: random.Random, chunks, n: int) -> list[tuple[str, int]]:
    """(question, source chunk index): a sentence of a chunk's body with ~30% of its words dropped."""
    out: list[tuple[str, int]] = []
    while len(out) < n:
        ci = rng.randrange(len(chunks))
        body = chunks[ci].text.split("\n\n", 1)[-1]
        sentences = [s.strip("- ").strip() for s in body.replace("\n", " ").split(". ") if len(s.split()) >= 8]
        if not sentences:
            continue
        words = rng.choice(sentences).rstrip(".").split()
        kept = [w for w in words if rng.random() > 0.3] or words
        out.append((" ".join(kept) + "?", ci))
    return out
