"""Markdown sections of the sample corpus and the anchor shorthand the capture plan uses."""

import os
import re

CORPUS = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus"))

# --------------------------------------------------------------------------------------------
# Markdown sections (ATX headings outside code fences, setext headings, YAML front matter)
# --------------------------------------------------------------------------------------------
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def split_front_matter(raw):
    if raw.startswith("---\n"):
        end = raw.find("\n---\n", 4)
        if end == -1 and raw.endswith("\n---"):
            end = len(raw) - 4
        if end != -1:
            meta = {}
            for line in raw[4:end].splitlines():
                m = re.match(r"^(\w+):\s*(.*)$", line)
                if m:
                    v = m.group(2).strip()
                    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
                        v = v[1:-1]
                    meta[m.group(1)] = v
            return meta, raw[end + 5 :]
    return {}, raw


def sections(raw):
    """Return (front matter dict, {heading_path: section text})."""
    meta, body = split_front_matter(raw)
    lines = body.split("\n")
    heads = []
    fence = None
    for i, line in enumerate(lines):
        fm = FENCE.match(line)
        if fence:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            continue
        if fm:
            fence = fm.group(1)
            continue
        m = ATX.match(line)
        if m:
            title = re.sub(r"[ \t]+#+$", "", m.group(2) or "").strip()
            heads.append((i, len(m.group(1)), title))
            continue
        s = SETEXT.match(line)
        if (
            s
            and i > 0
            and lines[i - 1].strip()
            and not ATX.match(lines[i - 1])
            and (i == 1 or not lines[i - 2].strip())
            and not (heads and heads[-1][0] == i - 1)
        ):
            heads.append((i - 1, 1 if s.group(1)[0] == "=" else 2, lines[i - 1].strip()))
    out, stack = {}, []
    for j, (start, level, title) in enumerate(heads):
        end = heads[j + 1][0] if j + 1 < len(heads) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = " > ".join(t for _, t in stack)
        if path in out:
            raise SystemExit("duplicate heading path %r" % path)
        out[path] = "\n".join(lines[start:end]).strip()
    return meta, out


NOTES = {
    "atlas": "work/projects/atlas.md",
    "arch": "work/projects/atlas-architecture.md",
    "beacon": "work/projects/beacon.md",
    "steer": "work/meetings/2024-03-04-atlas-steering.md",
    "retro": "work/meetings/2024-02-06-team-retro.md",
    "oneone": "work/meetings/2024-04-16-one-on-one.md",
    "pmr": "work/meetings/2024-05-21-postmortem-review.md",
    "q3": "work/meetings/2024-06-11-q3-planning.md",
    "adr12": "work/decisions/adr-012-event-bus.md",
    "adr15": "work/decisions/adr-015-cache-ttl.md",
    "rot23": "work/oncall/rotation-2023.md",
    "rot24": "work/oncall/rotation-2024.md",
    "dbfo": "work/oncall/runbook-db-failover.md",
    "qbl": "work/oncall/runbook-queue-backlog.md",
    "hire": "work/hiring/backend-hiring-plan-2024.md",
    "iloop": "work/hiring/interview-loop.md",
    "inc": "work/reference/incident-log.md",
    "hm1": "personal/health/half-marathon-plan.md",
    "hm2": "personal/health/half-marathon-plan-revised.md",
    "tlog": "personal/health/training-log.md",
    "physio": "personal/health/physio-knee.md",
    "checkup": "personal/health/annual-checkup.md",
    "bud1": "personal/finance/budget-2024.md",
    "bud2": "personal/finance/budget-2024-midyear.md",
    "inv": "personal/finance/investments.md",
    "tax": "personal/finance/taxes-2023.md",
    "jp1": "personal/travel/japan-2024.md",
    "jp2": "personal/travel/japan-2024-itinerary-v2.md",
    "lis": "personal/travel/lisbon-weekend.md",
    "leak": "personal/home/bathroom-leak.md",
    "boiler": "personal/home/boiler-service.md",
    "shak": "personal/recipes/shakshuka.md",
    "sour": "personal/recipes/sourdough.md",
    "books": "personal/books/reading-2024.md",
}

# Incident-log headings used below (shorthand).
I12 = "inc:2024 > INC-2024-012: Atlas primary database failure"
I31 = "inc:2024 > INC-2024-031: Stale ETAs after re-route"
I14 = "inc:2023 > INC-2023-014: Trackr database disk full"
I40 = "inc:2024 > INC-2024-040: Beacon queue backlog after Textwire outage"
I29 = "inc:2024 > INC-2024-029: Beacon duplicate SMS"

# Sections that a chunker splits in two (they are longer than the chunk size). An anchor
# ending in "#1" / "#2" names the part before / from the marker line.
SPLITS = {I12 + " > Timeline": "- 14:22 Runbook step 1"}

_CACHE = {}


def note_sections(key):
    if key not in _CACHE:
        with open(os.path.join(CORPUS, NOTES[key]), encoding="utf-8") as f:
            meta, secs = sections(f.read())
        _CACHE[key] = (meta, secs)
    return _CACHE[key]


def resolve(anchor):
    """'note:Sub > Path[#n]' -> (rel_path, heading_path, text)."""
    part = None
    if re.search(r"#[12]$", anchor):
        anchor, part = anchor[:-2], int(anchor[-1])
    key, _, sub = anchor.partition(":")
    meta, secs = note_sections(key)
    title = next(iter(secs)).split(" > ")[0]
    path = title + (" > " + sub if sub else "")
    if path not in secs:
        raise SystemExit("no section %r in %s" % (path, NOTES[key]))
    text = secs[path]
    if part:
        marker = SPLITS[anchor]
        cut = text.index(marker)
        text = text[:cut].strip() if part == 1 else text[cut:].strip()
    return NOTES[key], path, text


def ref(r):
    if isinstance(r, tuple):  # ('FAKE', rel_path, heading_path): a fabricated citation
        return {"rel_path": r[1], "heading_path": r[2]}
    rel, path, _ = resolve(r)
    return {"rel_path": rel, "heading_path": path}
