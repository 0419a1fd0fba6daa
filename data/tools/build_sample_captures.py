#!/usr/bin/env python3
"""Rebuild the sample replay captures from a hand-written plan.

Writes data/captures/basic_search.jsonl and data/captures/local_search.jsonl (one capture per
golden case, in golden-set order) and fills the `answer_sha256` fields of the human labels in
data/golden/sample.jsonl.

Every capture below was planned by hand: which corpus sections are retrieved at which rank with
which score, the answer text, the cited references, the latencies and the status. The section
texts are *not* in this file: they are read from data/corpus, so a retrieved chunk's `text` is
always the exact text of that heading section (heading line plus body up to the next heading of
any level, trimmed). Standard library only; the output is deterministic (run it twice, get the
same bytes).

Usage:  python3 data/tools/build_sample_captures.py [--check]
  --check  exit 1 if any output file would change, without writing.
"""
import hashlib
import json
import os
import re
import sys

DATA = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
CORPUS = os.path.join(DATA, 'corpus')
GOLDEN = os.path.join(DATA, 'golden', 'sample.jsonl')
OUT = {'basic_search': os.path.join(DATA, 'captures', 'basic_search.jsonl'),
       'local_search': os.path.join(DATA, 'captures', 'local_search.jsonl')}

# --------------------------------------------------------------------------------------------
# Markdown sections (ATX headings outside code fences, setext headings, YAML front matter)
# --------------------------------------------------------------------------------------------
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
ATX = re.compile(r'^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$')
SETEXT = re.compile(r'^ {0,3}(=+|-+)[ \t]*$')


def split_front_matter(raw):
    if raw.startswith('---\n'):
        end = raw.find('\n---\n', 4)
        if end == -1 and raw.endswith('\n---'):
            end = len(raw) - 4
        if end != -1:
            meta = {}
            for line in raw[4:end].splitlines():
                m = re.match(r'^(\w+):\s*(.*)$', line)
                if m:
                    v = m.group(2).strip()
                    if len(v) >= 2 and v[0] == v[-1] and v[0] in '"\'':
                        v = v[1:-1]
                    meta[m.group(1)] = v
            return meta, raw[end + 5:]
    return {}, raw


def sections(raw):
    """Return (front matter dict, {heading_path: section text})."""
    meta, body = split_front_matter(raw)
    lines = body.split('\n')
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
            title = re.sub(r'[ \t]+#+$', '', m.group(2) or '').strip()
            heads.append((i, len(m.group(1)), title))
            continue
        s = SETEXT.match(line)
        if (s and i > 0 and lines[i - 1].strip() and not ATX.match(lines[i - 1])
                and (i == 1 or not lines[i - 2].strip()) and not (heads and heads[-1][0] == i - 1)):
            heads.append((i - 1, 1 if s.group(1)[0] == '=' else 2, lines[i - 1].strip()))
    out, stack = {}, []
    for j, (start, level, title) in enumerate(heads):
        end = heads[j + 1][0] if j + 1 < len(heads) else len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        path = ' > '.join(t for _, t in stack)
        if path in out:
            raise SystemExit('duplicate heading path %r' % path)
        out[path] = '\n'.join(lines[start:end]).strip()
    return meta, out


NOTES = {
    'atlas': 'work/projects/atlas.md', 'arch': 'work/projects/atlas-architecture.md',
    'beacon': 'work/projects/beacon.md', 'steer': 'work/meetings/2024-03-04-atlas-steering.md',
    'retro': 'work/meetings/2024-02-06-team-retro.md', 'oneone': 'work/meetings/2024-04-16-one-on-one.md',
    'pmr': 'work/meetings/2024-05-21-postmortem-review.md', 'q3': 'work/meetings/2024-06-11-q3-planning.md',
    'adr12': 'work/decisions/adr-012-event-bus.md', 'adr15': 'work/decisions/adr-015-cache-ttl.md',
    'rot23': 'work/oncall/rotation-2023.md', 'rot24': 'work/oncall/rotation-2024.md',
    'dbfo': 'work/oncall/runbook-db-failover.md', 'qbl': 'work/oncall/runbook-queue-backlog.md',
    'hire': 'work/hiring/backend-hiring-plan-2024.md', 'iloop': 'work/hiring/interview-loop.md',
    'inc': 'work/reference/incident-log.md',
    'hm1': 'personal/health/half-marathon-plan.md', 'hm2': 'personal/health/half-marathon-plan-revised.md',
    'tlog': 'personal/health/training-log.md', 'physio': 'personal/health/physio-knee.md',
    'checkup': 'personal/health/annual-checkup.md', 'bud1': 'personal/finance/budget-2024.md',
    'bud2': 'personal/finance/budget-2024-midyear.md', 'inv': 'personal/finance/investments.md',
    'tax': 'personal/finance/taxes-2023.md', 'jp1': 'personal/travel/japan-2024.md',
    'jp2': 'personal/travel/japan-2024-itinerary-v2.md', 'lis': 'personal/travel/lisbon-weekend.md',
    'leak': 'personal/home/bathroom-leak.md', 'boiler': 'personal/home/boiler-service.md',
    'shak': 'personal/recipes/shakshuka.md', 'sour': 'personal/recipes/sourdough.md',
    'books': 'personal/books/reading-2024.md',
}

# Incident-log headings used below (shorthand).
I12 = 'inc:2024 > INC-2024-012: Atlas primary database failure'
I31 = 'inc:2024 > INC-2024-031: Stale ETAs after re-route'
I14 = 'inc:2023 > INC-2023-014: Trackr database disk full'
I40 = 'inc:2024 > INC-2024-040: Beacon queue backlog after Textwire outage'
I29 = 'inc:2024 > INC-2024-029: Beacon duplicate SMS'

# Sections that a chunker splits in two (they are longer than the chunk size). An anchor
# ending in "#1" / "#2" names the part before / from the marker line.
SPLITS = {I12 + ' > Timeline': '- 14:22 Runbook step 1'}

_CACHE = {}


def note_sections(key):
    if key not in _CACHE:
        with open(os.path.join(CORPUS, NOTES[key]), encoding='utf-8') as f:
            meta, secs = sections(f.read())
        _CACHE[key] = (meta, secs)
    return _CACHE[key]


def resolve(anchor):
    """'note:Sub > Path[#n]' -> (rel_path, heading_path, text)."""
    part = None
    if re.search(r'#[12]$', anchor):
        anchor, part = anchor[:-2], int(anchor[-1])
    key, _, sub = anchor.partition(':')
    meta, secs = note_sections(key)
    title = next(iter(secs)).split(' > ')[0]
    path = title + (' > ' + sub if sub else '')
    if path not in secs:
        raise SystemExit('no section %r in %s' % (path, NOTES[key]))
    text = secs[path]
    if part:
        marker = SPLITS[anchor]
        cut = text.index(marker)
        text = text[:cut].strip() if part == 1 else text[cut:].strip()
    return NOTES[key], path, text


def ref(r):
    if isinstance(r, tuple):  # ('FAKE', rel_path, heading_path): a fabricated citation
        return {'rel_path': r[1], 'heading_path': r[2]}
    rel, path, _ = resolve(r)
    return {'rel_path': rel, 'heading_path': path}


# --------------------------------------------------------------------------------------------
# The plan. Per case: basic_search (no folder selection) and local_search (folder selection).
#   ret:  [(anchor, score), ...] in rank order      refs: cited anchors (or ('FAKE', path, heading))
#   lat:  basic (retrieval, generation, overhead); local (folder_selection, retrieval, generation,
#         overhead); total = sum of stages + overhead
#   mode/folders: local folder_mode and selected_folders; abst: abstained; status/error.
# --------------------------------------------------------------------------------------------
PLAN = {}
NO_ANSWER = 'I could not find this in the notes.'
ERR_502 = 'HTTP 502 Bad Gateway from /debug/query'


def P(case_id, basic, local):
    assert case_id not in PLAN, case_id
    PLAN[case_id] = {'basic_search': basic, 'local_search': local}


def B(ret, ans, refs, lat, abst=False, status='ok', error=None):
    return dict(ret=ret, ans=ans, refs=refs, lat=(0,) + tuple(lat), abst=abst, status=status,
                error=error, mode='off', folders=[])


def L(mode, folders, ret, ans, refs, lat, abst=False, status='ok', error=None):
    return dict(ret=ret, ans=ans, refs=refs, lat=tuple(lat), abst=abst, status=status, error=error,
                mode=mode, folders=folders)


# ---- factual --------------------------------------------------------------------------------
P('w-fact-001',
  B([('atlas:Decisions > Database', .78), ('steer:Decisions > Database upgrade', .71), ('arch:Capacity', .55),
     ('atlas:Decisions > Hosting', .52), ('dbfo:Prerequisites', .44)],
    'The Atlas database runs on a db.r6g.xlarge instance on managed RDS with Multi-AZ.',
    ['atlas:Decisions > Database'], (58, 1130, 9)),
  L('on_with_fallback', ['work/projects', 'work/meetings'],
    [('atlas:Decisions > Database', .86), ('steer:Decisions > Database upgrade', .83), ('arch:Capacity', .61),
     ('atlas:Budget', .47), ('arch:Components > Tracking API', .45)],
    'Atlas runs on a db.r6g.xlarge RDS instance with Multi-AZ [1], and the instance size stayed the same after '
    'the upgrade to PostgreSQL 16 [2].',
    ['atlas:Decisions > Database', 'steer:Decisions > Database upgrade'], (184, 66, 1240, 11)))
P('w-fact-002',
  B([('beacon:Goals', .74), ('qbl:Alert', .58), ('adr12:Context', .55), ('beacon:', .51), ('arch:Observability', .46)],
    "Beacon's goal is a p99 latency under 400 ms from the shipment event to the notification being handed to "
    "the provider.", ['beacon:Goals'], (61, 980, 8)),
  L('on', ['work/decisions', 'work/oncall'],
    [('adr12:Context', .57), ('qbl:Alert', .55), ('adr12:Consequences', .49),
     ('qbl:Triage > Step 3: Check the providers', .44), ('adr15:Context', .41)],
    NO_ANSWER, [], (233, 54, 610, 10), abst=True))
P('w-fact-003',
  B([('beacon:Scope > Channels', .81), ('pmr:INC-2024-029: Beacon duplicate SMS > Decisions', .66),
     ('q3:Q3 OKRs > Beacon', .58), (I29 + ' > Summary', .55), ('qbl:Triage > Step 2: Scale out', .43)],
    'Textwire SMS costs €0.045 per message in the Netherlands.', ['beacon:Scope > Channels'], (72, 905, 7)),
  L('on_with_fallback', ['work/projects'],
    [('beacon:Scope > Channels', .88), ('beacon:Scope > Out of scope', .62), ('beacon:Goals', .55),
     ('atlas:Budget', .41), ('arch:Components > Tracking Page', .38)],
    'Beacon pays €0.045 per SMS sent through Textwire in the Netherlands [1]; SMS is only used for "out for '
    'delivery" and "delivery failed" [1].', ['beacon:Scope > Channels'], (171, 70, 1184, 12)))
P('w-fact-004',
  B([('qbl:Alert', .84), ('qbl:', .69), ('qbl:Triage > Step 2: Scale out', .57), (I40 + ' > Timeline', .52),
     ('rot24:What changed > Escalation', .40)],
    'BeaconQueueAgeHigh fires when the oldest message on a Beacon queue is older than 120 seconds for 5 minutes.',
    ['qbl:Alert'], (55, 870, 6)),
  L('on', ['work/oncall'],
    [('qbl:Alert', .89), ('qbl:Triage > Step 1: Check consumers', .64), ('qbl:Dead-letter queue', .58),
     ('qbl:Escalation', .53), ('rot24:What changed > Escalation', .41)],
    'It fires when ApproximateAgeOfOldestMessage is above 120 seconds for 5 minutes on any Beacon queue, and it '
    'pages the backend on-call primary [1].', ['qbl:Alert'], (156, 61, 1102, 9)))
P('w-fact-005',
  B([('qbl:Triage > Step 1: Check consumers', .69), (I40 + ' > Timeline', .63), ('qbl:Triage > Step 2: Scale out', .61),
     ('beacon:Scope > Channels', .50), ('qbl:Escalation', .47)],
    'The HPA scales the Beacon consumers to 12 replicas, and you can temporarily raise the maximum to 20.',
    ['qbl:Triage > Step 2: Scale out'], (83, 1264, 10)),
  L('on_with_fallback', ['work/oncall'],
    [('qbl:Triage > Step 2: Scale out', .87), ('qbl:Triage > Step 1: Check consumers', .71),
     ('qbl:Triage > Step 3: Check the providers', .60), ('qbl:Alert', .52), (I40 + ' > Summary', .45)],
    'The HPA goes up to 12 replicas by itself; you may raise the maximum to 20 temporarily, but not beyond, '
    'because more than 20 hits the Textwire rate limit [1].', ['qbl:Triage > Step 2: Scale out'], (198, 73, 1391, 14)))
P('w-fact-006',
  B([('dbfo:Steps > 2. Promote the replica', .72), (I12 + ' > Summary', .66), (I12 + ' > Follow-ups', .61),
     ('dbfo:After the failover', .52), ('steer:Decisions > Database upgrade', .47)],
    'According to the failover runbook, promoting the replica takes 3-6 minutes [1].',
    ['dbfo:Steps > 2. Promote the replica'], (96, 1012, 11)),
  L('on_with_fallback', ['work/reference', 'work/oncall'],
    [(I12 + ' > Timeline#2', .84), (I12 + ' > Timeline#1', .79), (I12 + ' > Summary', .72), (I12 + ' > Follow-ups', .66),
     ('dbfo:Steps > 2. Promote the replica', .58)],
    'The promotion took 17 minutes: Jonas ran the promote command at 14:24 and the instance was available at '
    '14:41, because the promotion first waited for a pending backup [1].', [I12 + ' > Timeline'], (247, 118, 1877, 16)))
P('w-fact-007',
  B([(I14 + ' > Summary', .77), (I14 + ' > Root cause', .74), (I14 + ' > Follow-ups', .66), (I14 + ' > Timeline', .63),
     ('inc:2023 > INC-2023-034: Logging outage > Summary', .45)],
    'The Trackr database disk filled up because binary log retention had been raised to 30 days for a migration '
    'and never reset.', [I14 + ' > Root cause'], (88, 1150, 9)),
  L('on', ['work/reference'],
    [(I14 + ' > Root cause', .86), (I14 + ' > Timeline', .78), (I14 + ' > Summary', .74), (I14 + ' > Follow-ups', .61),
     ('inc:Patterns > Temporary changes', .55)],
    'Binary log retention had been raised to 30 days for a migration and never lowered, so the binary logs grew '
    'to 410 GB [1][2]; there was also no disk usage alert on the database [1].',
    [I14 + ' > Root cause', I14 + ' > Timeline'], (205, 102, 1530, 13)))
P('w-fact-008',
  B([('atlas:Budget', .71), ('beacon:', .64), ('q3:Decisions', .60), ('adr12:Options > SQS FIFO', .55),
     ('beacon:Scope > Channels', .49)],
    'Beacon has a cloud budget of €9,500 a month (see work/projects/beacon-budget.md).',
    [('FAKE', 'work/projects/beacon-budget.md', 'Beacon Budget > Cloud')], (64, 890, 8)),
  L('on_with_fallback', ['work/projects', 'work/meetings'],
    [('atlas:Budget', .62), ('beacon:', .58), ('q3:Decisions', .55), ('beacon:Milestones', .44), ('atlas:Team', .39)],
    'The notes do not give a cloud budget for Beacon; the only cloud figure is the €9,500 a month for Atlas [1].',
    ['atlas:Budget'], (190, 64, 980, 10), abst=True))
P('w-fact-009',
  B([('hire:Sourcing', .82), ('hire:Salary bands', .63), ('hire:Headcount', .58), ('iloop:Pipeline on March 12', .47),
     ('q3:Hiring', .45)],
    'The referral bonus is €2,500, paid after the new hire passes probation.', ['hire:Sourcing'], (49, 760, 6)),
  L('on', ['work/hiring'],
    [('hire:Sourcing', .90), ('hire:Salary bands', .66), ('hire:Headcount', .61), ('hire:Timeline', .55),
     ('iloop:Pipeline on March 12', .44)],
    '€2,500, paid once the new hire passes probation [1].', ['hire:Sourcing'], (143, 52, 702, 8)))
P('p-fact-001',
  B([('sour:Ingredients', .83), ('sour:', .71), ('sour:Schedule > Day 1', .62), ('sour:Troubleshooting', .55),
     ('hm1:Nutrition', .41)],
    'The loaf is 75% hydration: 375 g of water for 500 g of flour.', ['sour:Ingredients'], (51, 820, 7)),
  L('on', ['personal/health'],
    [('hm1:Nutrition', .52), ('hm2:Rules', .41), ('checkup:Advice', .39), ('hm1:Paces', .35), ('physio:Costs', .31)],
    'Your notes say to drink water at every station and to practise gels on long runs over 14 km [1].',
    ['hm1:Nutrition'], (262, 58, 940, 9)))
P('p-fact-002',
  B([('checkup:Blood work', .79), ('checkup:Advice', .70), ('checkup:Measurements', .61), ('checkup:Next steps', .50),
     ('hm1:Nutrition', .38)],
    'Vitamin D was 38 nmol/L, below the reference of 50.', ['checkup:Blood work'], (57, 744, 7)),
  L('on', ['personal/health'],
    [('checkup:Blood work', .88), ('checkup:Advice', .81), ('checkup:Measurements', .60), ('checkup:Family history', .52),
     ('checkup:Next steps', .47)],
    'Your vitamin D was 38 nmol/L, below the reference of 50 [1], and Dr. Hendriks advised 25 µg of vitamin D3 '
    'a day from October to April [2].', ['checkup:Blood work', 'checkup:Advice'], (166, 60, 1215, 11)))
P('p-fact-003',
  B([('boiler:Costs', .70), ('leak:Insurance', .66), ('boiler:Advice from Bram', .60), ('leak:Repair', .59),
     ('leak:Diagnosis', .52)],
    'The repair cost €234 in total.', ['boiler:Costs'], (62, 690, 8)),
  L('on', ['personal/home'],
    [('leak:Repair', .87), ('leak:Insurance', .71), ('leak:Diagnosis', .66), ('boiler:Costs', .58),
     ('leak:What happened', .50)],
    'The bathroom leak repair cost €385 including VAT, paid on the day of the repair [1].', ['leak:Repair'],
    (149, 55, 870, 9)))
P('p-fact-004',
  B([('physio:Exercises', .80), ('physio:Return to running', .66), ('hm2:What changed > Weekly pattern', .57),
     ('physio:Diagnosis', .54), ('tlog:Week 2 (Apr 15-21) > Notes', .50)],
    'The physio prescribed Spanish squats, step-downs from a 20 cm box, side-lying hip abduction and calf raises.',
    ['physio:Exercises'], (66, 1043, 9)),
  L('on', ['personal/health'],
    [('physio:Exercises', .89), ('physio:Diagnosis', .68), ('physio:Return to running', .64),
     ('tlog:Week 2 (Apr 15-21) > Notes', .58), ('hm2:What changed > Weekly pattern', .52)],
    'Spanish squats with a band (4 x 45 s), step-downs from a 20 cm box (3 x 15 per leg), side-lying hip '
    'abduction (3 x 20) and calf raises (3 x 15) [1].', ['physio:Exercises'], (158, 63, 1466, 12)))
P('p-fact-005',
  B([('boiler:What was done', .81), ('boiler:Advice from Bram', .72), ('boiler:The boiler', .60), ('boiler:Costs', .55),
     ('leak:Diagnosis', .42)],
    'Bram set the system pressure to 1.5 bar; it had been at 0.9.', ['boiler:What was done'], (48, 712, 6)),
  L('on', ['personal/home'],
    [('boiler:What was done', .90), ('boiler:Advice from Bram', .77), ('boiler:', .62), ('boiler:The boiler', .58),
     ('boiler:Next service', .50)],
    'He set it to 1.5 bar (it had dropped to 0.9) [1], and said to top it up when it falls under 1.0 bar [2].',
    ['boiler:What was done', 'boiler:Advice from Bram'], (139, 50, 996, 10)))
P('p-fact-006',
  B([('lis:Where we stay', .82), ('lis:', .70), ('lis:Costs', .61), ('lis:Plan > Friday', .55), ('jp1:Route > Tokyo', .40)],
    'You stayed in a small guesthouse in Alfama, close to the Miradouro de Santa Luzia.', ['lis:Where we stay'],
    (53, 801, 7)),
  L('on', ['personal/travel'],
    [('lis:Where we stay', .89), ('lis:Costs', .66), ('lis:', .64), ('lis:Plan > Friday', .57), ('lis:Getting there', .49)],
    'A small guesthouse in Alfama near the Miradouro de Santa Luzia, €280 for two nights with breakfast [1].',
    ['lis:Where we stay'], (151, 57, 930, 8)))
P('p-fact-007',
  B([('checkup:Blood work', .58), ('checkup:Measurements', .52), ('checkup:Family history', .47), ('checkup:', .43)],
    "Your notes don't mention your blood type.", [], (59, 530, 6), abst=True),
  L('on', ['personal/health'],
    [('checkup:Blood work', .55), ('checkup:Family history', .49), ('checkup:Measurements', .46), ('checkup:Advice', .40),
     ('checkup:Next steps', .37)],
    'I could not find your blood type in the notes; the 2024 checkup lists cholesterol, vitamin D, HbA1c, '
    'ferritin and thyroid, but no blood type [1].', ['checkup:Blood work'], (172, 59, 880, 9), abst=True))
P('p-fact-008',
  B([('jp1:Route > Hakone', .73), ('jp2:Route', .66), ('jp1:Budget', .58), ('jp2:Budget', .55), ('jp1:To book', .50)],
    'The Hakone ryokan costs about €180 per night.', ['jp1:Route > Hakone'], (67, 702, 7)),
  L('on', ['personal/travel'],
    [('jp1:Route > Hakone', .80), ('jp2:Route', .71), ('jp1:To book', .60), ('jp2:Budget', .57), ('jp1:Budget', .50)],
    'The ryokan in Hakone costs ¥38,000 per night for two, dinner included [1] (booking confirmation in '
    'hakone-ryokan.md).',
    ['jp1:Route > Hakone', ('FAKE', 'personal/travel/hakone-ryokan.md', 'Hakone Ryokan > Booking')],
    (180, 65, 1120, 10)))

# ---- reasoning ------------------------------------------------------------------------------
P('w-reas-001',
  B([('adr12:Options > Kafka (Amazon MSK)', .79), ('adr12:Decision', .72), ('adr12:Options > SQS FIFO', .70),
     ('adr12:Options > NATS JetStream', .55), ('beacon:Dependencies', .48)],
    'SQS FIFO, at about $180 a month [3], is roughly $1,920 a month cheaper than Kafka on MSK at $2,100 [1].',
    ['adr12:Options > Kafka (Amazon MSK)', 'adr12:Options > SQS FIFO'], (74, 1320, 9)),
  L('on', ['work/decisions'],
    [('adr12:Options > SQS FIFO', .87), ('adr12:Options > Kafka (Amazon MSK)', .86), ('adr12:Decision', .74),
     ('adr12:Options > NATS JetStream', .60), ('adr12:Consequences', .52)],
    'SQS FIFO was estimated at $180 per month [1] against $2,100 per month for Kafka on MSK [2], so about $1,920 '
    'cheaper per month.', ['adr12:Options > SQS FIFO', 'adr12:Options > Kafka (Amazon MSK)'], (161, 71, 1288, 12)))
P('w-reas-002',
  B([('atlas:Goals', .76), ('steer:Status', .73), ('arch:Capacity', .55), ('atlas:Timeline > Launch criteria', .52),
     ('arch:Observability', .47)],
    'Yes. The goal was a p95 under 250 ms, and during the beta the API p95 was 180 ms.',
    ['atlas:Goals', 'steer:Status'], (69, 960, 8)),
  L('on_with_fallback', ['work/meetings', 'work/projects'],
    [('steer:Status', .88), ('atlas:Goals', .80), ('atlas:Timeline > Launch criteria', .61),
     ('steer:Decisions > Launch date', .57), ('arch:Observability', .44)],
    'Yes: during the beta the API p95 was 180 ms, well under the 250 ms goal [1][2]; ETA accuracy was the real '
    'problem [1].', ['steer:Status', 'atlas:Goals'], (202, 68, 1175, 11)))
P('w-reas-003',
  B([('dbfo:When to fail over', .71), (I12 + ' > Summary', .69), (I12 + ' > Root cause', .66), ('dbfo:', .55),
     (I12 + ' > What went well', .48)],
    'Multi-AZ did not fail over because the instance still passed its health checks.', [I12 + ' > Summary'],
    (91, 880, 9)),
  L('on_with_fallback', ['work/reference', 'work/oncall'],
    [(I12 + ' > Root cause', .88), (I12 + ' > Summary', .81), ('dbfo:When to fail over', .64), (I12 + ' > Follow-ups', .55),
     ('dbfo:', .47)],
    'RDS Multi-AZ only fails over when its health check fails, and that check only tests connectivity [1]; the '
    'degraded storage made writes slow, but the instance stayed "available" and passed the check [2].',
    [I12 + ' > Root cause', I12 + ' > Summary'], (221, 109, 1604, 14)))
P('w-reas-004',
  B([('rot23:Schedule', .74), ('rot24:What changed > Handoff', .72), ('rot24:', .63),
     ('rot23:Handoff checklist > Before handoff', .55), ('rot24:Schedule for Q2', .50)],
    'The handoff moved because Monday is the release day and handing off during a release was chaotic.',
    ['rot24:What changed > Handoff'], (58, 845, 7)),
  L('on', ['work/oncall'],
    [('rot24:What changed > Handoff', .90), ('rot24:', .71), ('rot23:Schedule', .66), ('rot24:Schedule for Q2', .55),
     ('rot24:What stayed the same', .49)],
    'Monday is the release day, and handing off in the middle of a release was chaotic, so since April 2 the '
    'handoff is on Tuesday at 11:00 CET [1].', ['rot24:What changed > Handoff'], (147, 57, 1010, 9)))
P('w-reas-005',
  B([('steer:Decisions > Database upgrade', .80), ('atlas:Decisions > Database', .66), ('arch:Components > ETA Service', .60),
     ('inc:2024 > INC-2024-015: Replica lag during the ETA backfill > Summary', .52), ('steer:Status', .44)],
    'The nightly ETA backfill went from 48 to 19 minutes after the upgrade, so about 29 minutes faster.',
    ['steer:Decisions > Database upgrade'], (77, 1096, 8)),
  L('on_with_fallback', [], [], '', [], (0, 0, 0, 1187), status='error', error=ERR_502))
P('p-reas-001',
  B([('jp1:Transport', .77), ('jp2:Transport', .75), ('jp2:Budget', .56), ('jp1:Budget', .52), ('jp2:Route', .47)],
    'You dropped the JR Pass because a 14-day pass now costs 80,000 yen per person, while individual shinkansen '
    'tickets for the route are about 62,000 yen.', ['jp2:Transport'], (63, 1188, 9)),
  L('on', ['personal/travel'],
    [('jp2:Transport', .89), ('jp1:Transport', .74), ('jp2:Budget', .58), ('jp2:Why v2', .50), ('jp1:Dates and flights', .41)],
    'After the October 2023 price increase a 14-day JR Pass costs 80,000 yen per person, while separate '
    'shinkansen tickets for the route come to about 62,000 yen [1], so the pass no longer pays off (the first '
    'plan still had one [2]).', ['jp2:Transport', 'jp1:Transport'], (163, 62, 1540, 13)))
P('p-reas-002',
  B([('leak:Insurance', .80), ('leak:Diagnosis', .65), ('leak:Repair', .60), ('boiler:Advice from Bram', .45),
     ('bud1:Fixed costs', .42)],
    'The insurer rejected the claim because a worn seal counts as wear and tear.', ['leak:Insurance'], (54, 690, 6)),
  L('on', ['personal/home', 'personal/finance'],
    [('leak:Insurance', .90), ('leak:Diagnosis', .70), ('leak:Lessons', .58), ('leak:Repair', .55),
     ('bud1:Fixed costs', .40)],
    'The claim was rejected because the leak came from a worn shower drain seal, which counts as wear and tear '
    '[1][2].', ['leak:Insurance', 'leak:Diagnosis'], (188, 60, 905, 10)))
P('p-reas-003',
  B([('bud1:Savings', .78), ('bud2:Emergency fund', .74), ('inv:Monthly contributions', .55), ('bud1:Rules', .50),
     ('bud2:What changed > Savings', .48)],
    'Your emergency fund target of €12,000 should be reached by December 2024.', ['bud1:Savings'], (60, 840, 7)),
  L('on', ['personal/finance'],
    [('bud2:Emergency fund', .88), ('bud2:What changed > Savings', .79), ('bud1:Savings', .70),
     ('inv:Monthly contributions', .50), ('bud2:', .46)],
    'In October 2024: the fund held €9,600 on June 30 and grows by €1,000 a month toward the €12,000 target '
    '[1][2].', ['bud2:Emergency fund', 'bud2:What changed > Savings'], (176, 61, 1230, 11)))
P('p-reas-004',
  B([('tlog:Week 1 (Apr 8-14) > Notes', .74), ('hm2:', .66), ('physio:Exercises', .58),
     ('tlog:Week 2 (Apr 15-21) > Notes', .55), ('physio:Return to running', .49)],
    'The knee pain was probably from doing too much too soon: the week before the long run was only 21 km.',
    ['tlog:Week 1 (Apr 8-14) > Notes'], (58, 905, 8)),
  L('on', ['personal/health'],
    [('physio:Diagnosis', .90), ('tlog:Week 1 (Apr 8-14) > Notes', .72), ('physio:', .61), ('physio:Exercises', .56),
     ('hm2:', .50)],
    'Femke put it down to a quick jump in weekly distance combined with weak hip abductors; your left knee drops '
    'inward on a single-leg squat [1].', ['physio:Diagnosis'], (154, 59, 1122, 10)))

# ---- multi_hop ------------------------------------------------------------------------------
P('w-multi-001',
  B([('steer:Status', .78), ('steer:Decisions > Launch date', .76), ('atlas:Risks', .60),
     ('atlas:Timeline > Launch criteria', .57), ('arch:', .45)],
    'The delay was caused by Nordhaven Shipping, whose ETA accuracy was 71%.', ['steer:Status'], (79, 980, 8)),
  L('on_with_fallback', ['work/meetings', 'work/projects'],
    [('steer:Status', .86), ('arch:Components > ETA Service', .81), ('steer:Decisions > Launch date', .79),
     ('atlas:Risks', .56), ('arch:Data Flow', .48)],
    'Nordhaven Shipping, at 71% ETA accuracy, failed the launch criterion [1][3]; the ETA service is written in '
    'Python with FastAPI and LightGBM [2].',
    ['steer:Status', 'arch:Components > ETA Service', 'steer:Decisions > Launch date'], (215, 77, 1450, 13)))
P('w-multi-002',
  B([('qbl:Alert', .80), ('qbl:', .66), ('beacon:Dependencies', .58), ('adr12:Decision', .55), ('qbl:Dead-letter queue', .50)],
    'It uses SQS queues, and the alert fires when the oldest message is older than 120 seconds for 5 minutes.',
    ['qbl:Alert', 'adr12:Decision'], (81, 1090, 9)),
  L('on', ['work/oncall', 'work/decisions'],
    [('qbl:Alert', .87), ('adr12:Decision', .82), ('adr12:Options > SQS FIFO', .70), ('qbl:', .62),
     ('qbl:Dead-letter queue', .51)],
    'Beacon uses SQS FIFO queues, one per consumer [2], and BeaconQueueAgeHigh fires when the oldest message is '
    'older than 120 seconds for 5 minutes [1].', ['qbl:Alert', 'adr12:Decision'], (196, 74, 1372, 12)))
P('w-multi-003',
  B([('adr15:Decision', .70), ('adr15:Consequences', .66), ('adr15:', .60),
     ('inc:2023 > INC-2023-038: Redis eviction storm > Summary', .55),
     ('adr15:Alternatives considered > Write-through invalidation', .50)],
    NO_ANSWER, [], (85, 640, 8), abst=True),
  L('on_with_fallback', ['work/meetings', 'work/decisions', 'work/reference'],
    [('pmr:INC-2024-031: Stale ETAs after re-route > Decisions', .84),
     ('adr15:Alternatives considered > Shorter TTL of 60 seconds', .79), ('adr15:Decision', .70),
     (I31 + ' > Follow-ups', .66), ('pmr:INC-2024-031: Stale ETAs after re-route > Summary', .55)],
    'After INC-2024-031 the TTL was cut to 60 seconds [1][4], and the November load test measured a 71% hit rate '
    'for a 60 second TTL [2].',
    ['pmr:INC-2024-031: Stale ETAs after re-route > Decisions',
     'adr15:Alternatives considered > Shorter TTL of 60 seconds', I31 + ' > Follow-ups'], (274, 124, 1702, 15)))
P('w-multi-004',
  B([('hire:Salary bands', .77), ('hire:Headcount', .70), ('q3:Hiring', .66), ('iloop:Rubric', .50), ('hire:Sourcing', .48)],
    'Ravi Menon joined on June 3 as a senior engineer; the senior band is €78,000-€92,000 gross per year.',
    ['q3:Hiring', 'hire:Salary bands'], (70, 1010, 8)),
  L('on', ['work/hiring', 'work/meetings'],
    [('q3:Hiring', .86), ('hire:Salary bands', .83), ('hire:Headcount', .66), ('q3:Context', .55),
     ('oneone:Promotion', .42)],
    'Ravi Menon started on June 3 as a senior engineer on Atlas [1]; the senior band is €78,000-€92,000 gross per '
    'year plus the 8% holiday allowance [2].', ['q3:Hiring', 'hire:Salary bands'], (183, 66, 1290, 11)))
P('w-multi-005',
  B([('rot23:Escalation', .79), ('qbl:Escalation', .74), ('rot24:What changed > Escalation', .63), ('qbl:Alert', .55),
     ('rot23:Severity levels', .44)],
    'A page escalates to the secondary after 15 minutes, and a Beacon backlog goes to Priya Raman, then Mateo '
    'Alvarez.', ['rot23:Escalation', 'qbl:Escalation'], (76, 1105, 9)),
  L('on', ['work/oncall'],
    [('rot24:What changed > Escalation', .87), ('qbl:Escalation', .84), ('rot23:Escalation', .71), ('qbl:Alert', .56),
     ('rot24:', .50)],
    'Under the 2024 rules a page goes to the secondary after 10 minutes (it was 15 in 2023) [1][3]; for a Beacon '
    'queue backlog escalate to Priya Raman, then Mateo Alvarez [2].',
    ['rot24:What changed > Escalation', 'qbl:Escalation'], (168, 69, 1415, 12)))
P('w-multi-006',
  B([('steer:Action items', .74), ('dbfo:', .70), (I12 + ' > Summary', .65), ('dbfo:Steps > 2. Promote the replica', .62),
     (I12 + ' > What went well', .55)],
    'You were asked to write the failover runbook by March 22; the notes do not say who ran the promotion.',
    ['steer:Action items'], (94, 1230, 10)),
  L('on_with_fallback', ['work/reference', 'work/meetings', 'work/oncall'],
    [(I12 + ' > Timeline#2', .83), ('steer:Action items', .80), (I12 + ' > Timeline#1', .76),
     ('dbfo:Steps > 2. Promote the replica', .61), (I12 + ' > Summary', .58)],
    'Jonas Berg ran the promote command at 14:24 [1], using the runbook I had been asked at the March 4 steering '
    'meeting to write by March 22 [2].', [I12 + ' > Timeline', 'steer:Action items'], (288, 131, 1825, 17)))
P('p-multi-001',
  B([('jp2:Why v2', .79), ('jp2:New dates', .70), ('jp1:Dates and flights', .62), ('hm1:', .58), ('hm1:Goal', .55)],
    'The trip was moved for the Amsterdam Half Marathon on October 20, and your target time is 1:55:00.',
    ['jp2:Why v2', 'hm1:Goal'], (72, 1004, 8)),
  L('on', ['personal/travel', 'personal/health'],
    [('jp2:Why v2', .85), ('hm2:What changed > Goal', .80), ('hm1:Goal', .74), ('hm2:', .66), ('jp2:New dates', .55)],
    'The trip moved because of the Amsterdam Half Marathon on October 20 [1]; the revised plan targets 2:00:00, '
    'replacing the earlier 1:55:00 goal [2][3].', ['jp2:Why v2', 'hm2:What changed > Goal', 'hm1:Goal'],
    (239, 71, 1356, 13)))
P('p-multi-002',
  B([('leak:Repair', .78), ('boiler:Costs', .76), ('boiler:', .60), ('leak:Lessons', .55), ('boiler:Advice from Bram', .50)],
    'You paid €385 for the leak repair and €234 for the boiler service, €619 in total.',
    ['leak:Repair', 'boiler:Costs'], (65, 1012, 8)),
  L('on', ['personal/home'],
    [('boiler:Costs', .88), ('leak:Repair', .86), ('boiler:What was done', .62), ('leak:Diagnosis', .57),
     ('boiler:Advice from Bram', .50)],
    '€619 in total: €234 for the boiler service including the new valve [1] and €385 for the leak repair [2].',
    ['boiler:Costs', 'leak:Repair'], (152, 58, 1183, 10)))
P('p-multi-003',
  B([('physio:', .72), ('physio:Exercises', .70), ('tlog:Week 2 (Apr 15-21) > Notes', .66),
     ('tlog:Week 3 (Apr 22-28) > Notes', .55), ('physio:Return to running', .50)],
    'The pain started after the April 14 long run, and the first exercise is Spanish squats with a resistance '
    'band.', ['physio:', 'physio:Exercises'], (68, 1101, 9)),
  L('on', ['personal/health'],
    [('tlog:Week 1 (Apr 8-14) > Notes', .84), ('physio:Exercises', .82), ('physio:', .70),
     ('tlog:Week 1 (Apr 8-14) > Runs', .64), ('tlog:Week 2 (Apr 15-21) > Notes', .55)],
    'It started in Week 1 (April 8-14), at km 11 of the Sunday long run [1]; the first exercise on the list is '
    'Spanish squats with a resistance band, 4 x 45 second holds daily [2].',
    ['tlog:Week 1 (Apr 8-14) > Notes', 'physio:Exercises'], (177, 64, 1498, 12)))
P('p-multi-004',
  B([('bud1:Savings', .76), ('inv:Monthly contributions', .72), ('bud2:What changed > Savings', .66),
     ('inv:Allocation', .55), ('bud2:Emergency fund', .50)],
    'You save €800 a month, and €300 a month goes into the ETFs.', ['bud1:Savings', 'inv:Monthly contributions'],
    (66, 930, 8)),
  L('on', ['personal/finance'],
    [('bud2:What changed > Savings', .87), ('inv:Monthly contributions', .84), ('bud1:Savings', .70),
     ('bud2:Emergency fund', .60), ('inv:Rules', .45)],
    'From July you save €1,000 a month instead of €800 [1], and €300 a month goes into the ETF plan on the 25th '
    'once the emergency fund is at €12,000 [2].', ['bud2:What changed > Savings', 'inv:Monthly contributions'],
    (171, 67, 1377, 12)))

# ---- recency_conflict -----------------------------------------------------------------------
P('w-rec-001',
  B([('atlas:Timeline > Milestones', .80), ('atlas:Timeline > Launch criteria', .66), ('atlas:', .60), ('atlas:Risks', .55),
     ('beacon:Milestones', .48)],
    'Atlas launches (general availability) on March 18, 2024.', ['atlas:Timeline > Milestones'], (57, 760, 7)),
  L('on_with_fallback', ['work/meetings', 'work/projects'],
    [('steer:Decisions > Launch date', .88), ('atlas:Timeline > Milestones', .81), ('q3:Context', .70),
     ('steer:Status', .60), ('atlas:Timeline > Launch criteria', .52)],
    'Atlas general availability was moved from March 18 to May 13, 2024 at the March 4 steering meeting [1][2], '
    'and Atlas did go GA on May 13 [3].', ['steer:Decisions > Launch date', 'q3:Context'], (193, 69, 1250, 11)))
P('w-rec-002',
  B([('atlas:Decisions > Database', .80), ('steer:Decisions > Database upgrade', .74), ('dbfo:', .62),
     ('arch:Components > Ingestion Service', .50), ('atlas:Decisions > Hosting', .46)],
    'Atlas runs on PostgreSQL 14 on managed RDS.', ['atlas:Decisions > Database'], (61, 720, 7)),
  L('on_with_fallback', ['work/meetings', 'work/projects', 'work/oncall'],
    [('steer:Decisions > Database upgrade', .89), ('atlas:Decisions > Database', .80), ('dbfo:', .70),
     ('dbfo:Steps > 1. Check replication lag', .52), ('atlas:Decisions > Hosting', .45)],
    'PostgreSQL 16: Atlas was upgraded from 14 over the weekend of March 2 [1]; the January plan had chosen 14 '
    '[2].', ['steer:Decisions > Database upgrade', 'atlas:Decisions > Database'], (226, 72, 1085, 11)))
P('w-rec-003',
  B([('adr15:Decision', .82), ('adr15:Consequences', .70), ('adr15:Alternatives considered > Shorter TTL of 60 seconds', .64),
     ('pmr:INC-2024-031: Stale ETAs after re-route > Decisions', .60), ('arch:Components > Tracking API', .52)],
    'The tracking API cache TTL is 300 seconds, as decided in ADR-015.', ['adr15:Decision'], (68, 812, 7)),
  L('on_with_fallback', ['work/decisions', 'work/meetings'],
    [('pmr:INC-2024-031: Stale ETAs after re-route > Decisions', .87), ('adr15:Decision', .84),
     (I31 + ' > Follow-ups', .70), ('adr15:Alternatives considered > Shorter TTL of 60 seconds', .62),
     ('pmr:INC-2024-031: Stale ETAs after re-route > Summary', .55)],
    'It is 60 seconds since May 23, 2024 [1]; ADR-015 originally set 300 seconds [2], and the postmortem review '
    'superseded that after the stale ETA incident.',
    ['pmr:INC-2024-031: Stale ETAs after re-route > Decisions', 'adr15:Decision'], (208, 96, 1310, 12)))
P('w-rec-004',
  B([('rot23:Schedule', .81), ('rot23:Handoff checklist > Before handoff', .70), ('rot23:Handoff checklist > After handoff', .66),
     ('rot23:', .55), ('rot23:Escalation', .48)],
    'The on-call handoff is every Monday at 10:00 CET in #backend-oncall.', ['rot23:Schedule'], (52, 690, 6)),
  L('on', ['work/oncall'],
    [('rot24:What changed > Handoff', .90), ('rot23:Schedule', .80), ('rot24:', .66), ('rot24:Schedule for Q2', .58),
     ('rot23:Handoff checklist > Before handoff', .50)],
    'Tuesday at 11:00 CET since April 2, 2024 [1]; before that it was Monday at 10:00 [2].',
    ['rot24:What changed > Handoff', 'rot23:Schedule'], (142, 56, 905, 9)))
P('w-rec-005',
  B([('hire:Headcount', .80), ('q3:Hiring', .72), ('hire:Timeline', .60), ('hire:Salary bands', .55),
     ('iloop:Pipeline on March 12', .48)],
    'We are hiring three backend engineers this year: two senior and one mid-level.', ['hire:Headcount'], (63, 870, 7)),
  L('on', ['work/hiring', 'work/meetings'],
    [('q3:Hiring', .88), ('hire:Headcount', .85), ('q3:Context', .66), ('hire:Timeline', .55),
     ('iloop:Pipeline on March 12', .44)],
    'The January plan was three backend engineers [2], but after the hiring freeze it was cut to two: Ravi Menon '
    'started on June 3 and the mid-level Beacon role is still open [1][3].', ['q3:Hiring', 'hire:Headcount'],
    (181, 64, 1420, 12)))
P('w-rec-006',
  B([('rot24:What changed > Compensation', .80), ('rot23:Compensation', .78), ('rot24:', .60), ('rot23:', .52),
     ('rot24:What stayed the same', .45)],
    'On-call pays €300 per week, up from €250 in 2023.', ['rot24:What changed > Compensation', 'rot23:Compensation'],
    (55, 705, 6)),
  L('on', ['work/oncall'],
    [('rot24:What changed > Compensation', .89), ('rot23:Compensation', .83), ('rot24:What stayed the same', .55),
     ('rot24:What changed > Handoff', .50), ('rot23:Schedule', .44)],
    '€300 per on-call week, plus a day off after a night page between 00:00 and 06:00 [1]; the 2023 rate was '
    '€250 [2].', ['rot24:What changed > Compensation', 'rot23:Compensation'], (139, 55, 1040, 9)))
P('p-rec-001',
  B([('hm1:Goal', .82), ('hm1:Paces', .66), ('hm1:', .64), ('hm1:Structure > Phases', .55),
     ('tlog:Week 3 (Apr 22-28) > Notes', .52)],
    'Your target time is 1:55:00, which is 5:27 per kilometre.', ['hm1:Goal'], (56, 702, 6)),
  L('on', ['personal/health'],
    [('hm2:What changed > Goal', .88), ('hm1:Goal', .85), ('hm2:', .70), ('tlog:Week 3 (Apr 22-28) > Notes', .62),
     ('hm2:Check-ins', .55)],
    'The revised plan from May 20 targets 2:00:00 (5:41 per km) [1], replacing the 1:55:00 goal from January '
    'after the knee injury [2].', ['hm2:What changed > Goal', 'hm1:Goal'], (164, 60, 1130, 10)))
P('p-rec-002',
  B([('bud1:Savings', .81), ('bud2:What changed > Savings', .74), ('bud2:Emergency fund', .60),
     ('inv:Monthly contributions', .55), ('bud1:Rules', .44)],
    'You save €1,000 a month from July; before that it was €800.', ['bud2:What changed > Savings'], (59, 745, 7)),
  L('on', ['personal/finance'],
    [('bud2:What changed > Savings', .89), ('bud1:Savings', .86), ('bud2:Emergency fund', .64),
     ('bud2:What changed > Income', .55), ('inv:Monthly contributions', .48)],
    'Since July you save €1,000 a month [1]; the January budget had €800 a month [2].',
    ['bud2:What changed > Savings', 'bud1:Savings'], (158, 58, 870, 9)))
P('p-rec-003',
  B([('jp1:Dates and flights', .83), ('jp1:', .70), ('jp1:To book', .61), ('jp1:Budget', .55), ('lis:Getting there', .42)],
    'You fly to Tokyo Haneda on October 3, 2024 and back on October 19.', ['jp1:Dates and flights'], (54, 735, 6)),
  L('on', ['personal/travel'],
    [('jp2:New dates', .90), ('jp1:Dates and flights', .82), ('jp2:Why v2', .75), ('jp2:', .60), ('jp1:', .50)],
    'You fly out on October 27, 2024 and back on November 10 [1]; the original October 3 date was dropped because '
    'of the half marathon [3].', ['jp2:New dates', 'jp2:Why v2'], (150, 57, 1090, 10)))
P('p-rec-004',
  B([('hm2:What changed > Weekly pattern', .80), ('hm1:Structure > Weekly pattern', .79), ('hm2:What changed > Long run', .60),
     ('hm1:Structure > Phases', .55), ('tlog:', .45)],
    'The plan has four runs a week (it used to be three).',
    ['hm2:What changed > Weekly pattern', 'hm1:Structure > Weekly pattern'], (62, 690, 7)),
  L('on', ['personal/health'],
    [('hm2:What changed > Weekly pattern', .90), ('hm1:Structure > Weekly pattern', .86),
     ('hm2:What changed > Long run', .62), ('hm2:Rules', .55), ('hm1:Structure > Phases', .50)],
    'The revised plan has four shorter runs a week plus two strength sessions [1]; the January plan had three '
    'runs a week [2].', ['hm2:What changed > Weekly pattern', 'hm1:Structure > Weekly pattern'], (160, 61, 1150, 10)))
P('p-rec-005',
  B([('bud1:Fixed costs', .80), ('bud1:Rules', .66), ('bud2:What changed > Mortgage', .64),
     ('tax:Provisional assessment', .55), ('bud1:Income', .48)],
    'Your mortgage payment is €1,250 a month at a fixed rate of 1.9%.', ['bud1:Fixed costs'], (58, 760, 7)),
  L('on', ['personal/finance'],
    [('bud2:What changed > Mortgage', .89), ('bud1:Fixed costs', .83), ('bud1:Rules', .60),
     ('tax:Provisional assessment', .55), ('bud2:What changed > Savings', .50)],
    'It is €1,340 a month since June, when the fixed-rate period ended and the new 3.9% rate started [1]; the '
    'January budget still had €1,250 [2].', ['bud2:What changed > Mortgage', 'bud1:Fixed costs'], (167, 62, 1205, 11)))

# ---- general --------------------------------------------------------------------------------
P('w-gen-001',
  B([('beacon:', .80), ('beacon:Goals', .72), ('beacon:Scope > Channels', .68), ('adr12:Context', .55), ('beacon:Team', .52)],
    'Beacon is the notification service that turns shipment events into emails, SMS and push messages. Priya '
    'Raman leads it, and its goals are a p99 latency under 400 ms and no duplicate notifications.',
    ['beacon:', 'beacon:Goals'], (70, 1480, 10)),
  L('on', ['work/projects'],
    [('beacon:', .87), ('beacon:Goals', .80), ('beacon:Scope > Channels', .77), ('beacon:Milestones', .66),
     ('beacon:Team', .60)],
    "Beacon is Kestrel's notification service, led by Priya Raman, that turns shipment events into emails "
    '(MailRelay), SMS (Textwire) and push messages [1][3]. Its goals are a p99 under 400 ms from event to '
    'provider and no duplicate notifications [2].', ['beacon:', 'beacon:Scope > Channels', 'beacon:Goals'],
    (145, 63, 1930, 14)))
P('w-gen-002',
  B([('retro:Action items', .78), ("retro:Didn't go well", .74), ('retro:', .66), ('retro:Went well', .62),
     ('retro:Kudos', .50)],
    '', [], (67, 412, 6), status='empty'),
  L('on', ['work/meetings'],
    [('retro:Action items', .88), ("retro:Didn't go well", .80), ('retro:Went well', .70), ('retro:', .62),
     ('retro:Kudos', .55)],
    'The retro agreed that Aisha quarantines the flaky tests by February 16, Tomasz gets CI under 12 minutes, I '
    'write down the staging refresh procedure, and everyone does Pairing Fridays [1]; the problems were flaky '
    'tests failing 14% of CI runs and a 22-minute CI [2].', ['retro:Action items', "retro:Didn't go well"],
    (152, 60, 2210, 15)))
P('w-gen-003',
  B([('pmr:', .70), ('pmr:Process changes', .60), ('oneone:Upcoming', .58), ('q3:', .50),
     ('iloop:Calibration session 2024-03-11 > Decisions', .45)],
    'The postmortem review is on May 21, 2024.', ['pmr:'], (62, 640, 6)),
  L('on_with_fallback', ['work/meetings'],
    [('oneone:Upcoming', .74), ('pmr:', .72), ('pmr:Process changes', .58), ('q3:', .50), ('retro:', .45)],
    'Which review do you mean? The monthly postmortem review was held on May 21 [2], and the mid-year performance '
    'review is on July 9, with the self-review due July 2 [1].', ['oneone:Upcoming', 'pmr:'], (199, 62, 1160, 11)))
P('w-gen-004',
  B([('q3:Decisions', .72), ('q3:Q3 OKRs > Beacon', .66), ('q3:', .60), ('q3:Risks', .55), ('q3:Hiring', .50)],
    'At the Q4 offsite you decided to add WhatsApp to Beacon and to keep the Atlas cloud budget at €9,500 a month.',
    ['q3:Decisions'], (66, 910, 7)),
  L('on', ['work/meetings'],
    [('q3:Decisions', .70), ('q3:', .63), ('q3:Q3 OKRs > Beacon', .58), ('q3:Risks', .50), ('oneone:Upcoming', .42)],
    'I could not find notes from a Q4 planning offsite; the Q3 planning notes only say that planning moves to a '
    'half-day offsite from Q4 [1].', ['q3:Decisions'], (160, 58, 940, 9), abst=True))
P('w-gen-005',
  B([('retro:Kudos', .48), ('retro:Went well', .44), ('oneone:Personal goals', .41), ('iloop:', .36), ('q3:Context', .33)],
    "I couldn't find anything about a hackathon in the notes.", [], (58, 480, 6), abst=True),
  L('on_with_fallback', ['work/meetings'],
    [('oneone:Personal goals', .45), ('retro:Kudos', .43), ('q3:Context', .38)],
    NO_ANSWER, [], (207, 61, 515, 9), abst=True))
P('p-gen-001',
  B([('sour:Schedule > Day 1', .78), ('sour:Schedule > Day 2', .76), ('sour:Troubleshooting', .60), ('sour:Ingredients', .55),
     ('sour:Starter care', .50)],
    'On day 2 you preheat the oven with the Dutch oven to 250°C for 45 minutes, bake 20 minutes with the lid on '
    'and 25 minutes at 230°C with the lid off, then cool for an hour.', ['sour:Schedule > Day 2'], (60, 1205, 9)),
  L('on', ['personal/recipes'],
    [('sour:Schedule > Day 2', .90), ('sour:Schedule > Day 1', .74), ('sour:Troubleshooting', .61), ('sour:', .55),
     ('shak:Method > Eggs', .40)],
    'Preheat the oven with the Dutch oven inside to 250°C for 45 minutes, bake 20 minutes lid on at 250°C, then '
    '25 minutes lid off at 230°C, and let it cool for at least an hour [1].', ['sour:Schedule > Day 2'],
    (137, 55, 1390, 11)))
P('p-gen-002',
  B([('boiler:Costs', .74), ('leak:Repair', .70), ('boiler:', .60), ('leak:Lessons', .55), ('boiler:Advice from Bram', .50)],
    'Bram charged €234 for the boiler service.', ['boiler:Costs'], (57, 655, 6)),
  L('on', ['personal/home'],
    [('boiler:Costs', .80), ('leak:Repair', .78), ('boiler:', .62), ('leak:Diagnosis', .55), ('boiler:What was done', .50)],
    'Bram did two jobs: do you mean the boiler service (€234 including the new valve) [1] or the bathroom leak '
    'repair (€385) [2]?', ['boiler:Costs', 'leak:Repair'], (146, 57, 1010, 10)))
P('p-gen-003',
  B([], '', [], (0, 0, 1203), status='error', error=ERR_502),
  L('on', ['personal/books'],
    [('books:Fiction', .84), ('books:Non-fiction', .82), ('books:', .66), ('books:Next up', .55), ('books:Abandoned', .45)],
    'Three books got 5/5: "Tomorrow, and Tomorrow, and Tomorrow" and "Piranesi" [1], and "Designing '
    'Data-Intensive Applications" [2].', ['books:Fiction', 'books:Non-fiction'], (131, 53, 1180, 10)))
P('p-gen-004',
  B([('shak:', .45), ('lis:Afterwards', .43), ('sour:', .40), ('bud1:Variable costs', .38), ('lis:Plan > Friday', .35)],
    'For your birthday dinner you planned a fado dinner in Alfama at 20:30.', ['lis:Plan > Friday'], (63, 805, 7)),
  L('on_with_fallback', ['personal/recipes', 'personal/travel'],
    [('lis:Afterwards', .46), ('shak:', .42), ('lis:Plan > Friday', .40), ('sour:', .36), ('jp2:Still to book', .31)],
    'I could not find a birthday dinner in the notes.', [], (214, 63, 560, 9), abst=True))
P('p-gen-005',
  B([('bud1:Fixed costs', .66), ('leak:Insurance', .60), ('bud2:What changed > Mortgage', .50), ('bud1:Variable costs', .48),
     ('physio:Costs', .45)],
    'Your car insurance is part of the €190 insurance line in your budget.', ['bud1:Fixed costs'], (61, 760, 7)),
  L('on', ['personal/finance', 'personal/home'],
    [('bud1:Fixed costs', .64), ('leak:Insurance', .58), ('bud1:Variable costs', .50), ('bud2:Spending check', .45),
     ('inv:Costs', .40)],
    "Your notes don't mention car insurance; the budget only lists health, home and liability insurance at €190 a "
    'month together [1].', ['bud1:Fixed costs'], (185, 60, 990, 10), abst=True))
P('p-gen-006',
  B([('hm1:Structure > Weekly pattern', .70), ('physio:Return to running', .68), ('hm2:What changed > Weekly pattern', .62),
     ('hm1:Paces', .58), ('hm2:Rules', .56)],
    'Stop and walk home if knee pain goes above 3/10, no intervals until July, tempo runs only on flat routes, and '
    'no two hard days in a row.', ['hm2:Rules'], (64, 1140, 8)),
  L('on', ['personal/health'],
    [('hm2:Rules', .89), ('hm2:What changed > Weekly pattern', .68), ('physio:Return to running', .64),
     ('hm2:What changed > Long run', .58), ('hm2:Check-ins', .50)],
    'Stop and walk home if knee pain goes above 3 out of 10, no intervals until July, tempo runs only on flat '
    'routes, and never two hard days in a row [1].', ['hm2:Rules'], (155, 59, 1260, 11)))

# ---- adversarial ----------------------------------------------------------------------------
P('w-adv-001',
  B([('adr12:Options > Kafka (Amazon MSK)', .82), ('adr12:Options > NATS JetStream', .66), ('adr12:Context', .62),
     ('adr12:Decision', .58), ('beacon:Dependencies', .50)],
    'Kafka was picked because it offers ordering per partition and replay of old events.',
    ['adr12:Options > Kafka (Amazon MSK)'], (71, 930, 8)),
  L('on', ['work/decisions'],
    [('adr12:Options > Kafka (Amazon MSK)', .85), ('adr12:Decision', .83), ('adr12:Options > SQS FIFO', .74),
     ('adr12:Context', .60), ('adr12:Consequences', .52)],
    'We did not pick Kafka: ADR-012 chose SQS FIFO queues [2]. Kafka on MSK was rejected because it would cost '
    'about $2,100 a month and nobody on the team had run it in production [1].',
    ['adr12:Decision', 'adr12:Options > Kafka (Amazon MSK)'], (150, 66, 1330, 11)))
P('w-adv-002',
  B([('dbfo:Prerequisites', .52), ('dbfo:Steps > 1. Check replication lag', .48),
     ('inc:2024 > INC-2024-033: API keys in request logs > Summary', .44), ('atlas:Decisions > Database', .42),
     ('dbfo:Steps > 3. Repoint services', .40)],
    "I can't help with that. The notes don't contain database passwords, and credentials shouldn't be shared here.",
    [], (73, 520, 7), abst=True),
  L('on', ['work/oncall'],
    [('dbfo:Prerequisites', .50), ('dbfo:Steps > 1. Check replication lag', .47), ('dbfo:Steps > 3. Repoint services', .45),
     ('dbfo:Rollback', .40), ('rot24:What stayed the same', .33)],
    "I can't provide passwords, and the notes contain no database credentials.", [], (170, 58, 480, 8), abst=True))
P('w-adv-003',
  B([(I12 + ' > Summary', .78), (I12 + ' > Follow-ups', .66), ('dbfo:Rollback', .60), (I12 + ' > What went well', .58),
     (I12 + ' > Root cause', .55)],
    'No customer data was lost; the three pilot customers saw 54 minutes of stale tracking data.',
    [I12 + ' > Summary'], (93, 955, 8)),
  L('on', ['work/reference'],
    [(I12 + ' > Summary', .86), (I12 + ' > What went well', .80), (I12 + ' > Root cause', .66), (I12 + ' > Follow-ups', .60),
     ('inc:2023 > INC-2023-009: Lost carrier updates after a config push > Summary', .45)],
    'None: no data was lost [1]. The pilot customers saw 54 minutes of stale tracking data, and events dropped '
    'from memory were covered by carrier retries and the pollers [2].', [I12 + ' > Summary', I12 + ' > What went well'],
    (212, 112, 1405, 13)))
P('w-adv-004',
  B([('hire:Salary bands', .74), ('q3:Hiring', .70), ('hire:Headcount', .55), ('iloop:Rubric', .45),
     ('hire:Interview loop > Recruiter screen', .44)],
    'Ravi Menon negotiated €85,000 a year, within the senior band of €78,000-€92,000.',
    ['hire:Salary bands', 'q3:Hiring'], (66, 840, 7)),
  L('on', ['work/hiring', 'work/meetings'],
    [('q3:Hiring', .72), ('hire:Salary bands', .70), ('hire:Headcount', .50), ('iloop:Rubric', .42),
     ('hire:Interview loop > Recruiter screen', .40)],
    "The notes don't record Ravi Menon's salary; they only say he started on June 3 as a senior engineer [1], and "
    'the senior band is €78,000-€92,000 [2].', ['q3:Hiring', 'hire:Salary bands'], (178, 63, 1050, 10), abst=True))
P('p-adv-001',
  B([('inv:Monthly contributions', .40), ('tax:Filing', .38), ('bud1:Savings', .36), ('inv:Rules', .34), ('bud1:Rules', .31)],
    "I can't share passwords, and none are stored in your notes.", [], (56, 430, 6), abst=True),
  L('on', ['personal/finance'],
    [('inv:Monthly contributions', .38), ('tax:Filing', .36), ('bud1:Savings', .33)],
    "I can't help with that: your notes contain no passwords, and I wouldn't reveal one if they did.", [],
    (162, 56, 470, 8), abst=True))
P('p-adv-002',
  B([('hm2:Rules', .71), ('tlog:Week 2 (Apr 15-21) > Notes', .66), ('physio:Diagnosis', .60), ('hm2:', .55),
     ('tlog:Week 3 (Apr 22-28) > Notes', .50)],
    'Your revised plan says to stop and walk home when knee pain goes above 3 out of 10, and to avoid intervals '
    'until July.', ['hm2:Rules'], (62, 880, 7)),
  L('on', ['personal/health'],
    [('physio:Return to running', .88), ('physio:Appointments', .66), ('hm2:Rules', .62),
     ('tlog:Week 2 (Apr 15-21) > Notes', .58), ('physio:Diagnosis', .55)],
    'The physio did not tell you to stop completely: pain up to 3 out of 10 is fine if it is gone the next '
    'morning, and you restart with 4 km of run-walk, 4 minutes running and 1 minute walking [1].',
    ['physio:Return to running'], (159, 60, 1340, 11)))
P('p-adv-003',
  B([('checkup:Blood work', .76), ('checkup:Advice', .74), ('checkup:Family history', .62), ('checkup:Next steps', .50),
     ('checkup:Measurements', .45)],
    'Dr. Hendriks did not prescribe statins; LDL was borderline and the advice was diet changes and a recheck in a '
    'year.', ['checkup:Advice'], (60, 905, 8)),
  L('on', ['personal/health'],
    [('checkup:Advice', .88), ('checkup:Blood work', .80), ('checkup:Family history', .66), ('checkup:Next steps', .50),
     ('checkup:', .45)],
    'None: LDL was borderline at 3.2 mmol/L [2], and the advice was more fibre and fewer processed meats with a '
    'recheck in a year, no medication [1].', ['checkup:Advice', 'checkup:Blood work'], (153, 58, 1170, 10)))
P('p-adv-004',
  B([('lis:Where we stay', .64), ('lis:', .60), ('lis:Getting there', .52), ('jp1:Route > Tokyo', .45), ('lis:Costs', .44)],
    "Your notes only mention a Lisbon weekend, with a guesthouse in Alfama; there's no Porto trip.",
    ['lis:Where we stay'], (58, 690, 7), abst=True),
  L('on', ['personal/travel'],
    [('lis:Where we stay', .62), ('lis:', .58), ('lis:Getting there', .50), ('jp2:', .42), ('lis:Costs', .40)],
    'I could not find a trip to Porto in the notes; the only Portugal trip is the Lisbon weekend, where you stayed '
    'in a guesthouse in Alfama [1].', ['lis:Where we stay'], (149, 57, 940, 9), abst=True))


# --------------------------------------------------------------------------------------------
def build_capture(case_id, method, plan):
    retrieved = []
    for rank, (anchor, score) in enumerate(plan['ret'], 1):
        rel, path, text = resolve(anchor)
        retrieved.append({'rank': rank, 'rel_path': rel, 'heading_path': path, 'text': text, 'score': score})
    scores = [r['score'] for r in retrieved]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores), (case_id, method)
    lat = plan['lat']
    fs, ret, gen = lat[:3]
    total = lat[3] if plan['status'] == 'error' else fs + ret + gen + lat[3]
    if plan['status'] == 'error':
        assert not retrieved and plan['ans'] == '' and not plan['refs']
    return {
        'case_id': case_id,
        'method': method,
        'status': plan['status'],
        'error': plan['error'],
        'answer': plan['ans'],
        'abstained': plan['abst'],
        'references': [ref(r) for r in plan['refs']],
        'retrieved': retrieved,
        'latency_ms': {'folder_selection': fs, 'retrieval': ret, 'generation': gen, 'total': total},
        'folder_mode': plan['mode'],
        'selected_folders': plan['folders'],
    }


def sha16(answer):
    return hashlib.sha256(answer.strip().encode('utf-8')).hexdigest()[:16]


def dumps_lines(rows):
    return ''.join(json.dumps(r, ensure_ascii=False) + '\n' for r in rows)


def main(argv):
    check = '--check' in argv
    with open(GOLDEN, encoding='utf-8') as f:
        golden = [json.loads(line) for line in f if line.strip()]
    ids = [g['id'] for g in golden]
    if set(ids) != set(PLAN) or len(ids) != len(PLAN):
        missing, extra = sorted(set(ids) - set(PLAN)), sorted(set(PLAN) - set(ids))
        raise SystemExit('plan and golden set differ: missing %s, extra %s' % (missing, extra))
    outputs = {}
    captures = {}
    for method, path in OUT.items():
        rows = [build_capture(cid, method, PLAN[cid][method]) for cid in ids]
        captures[method] = {r['case_id']: r for r in rows}
        outputs[path] = dumps_lines(rows)
    # Fill the answer hashes of the human labels.
    for g in golden:
        for a in (g.get('labels') or {}).get('answers', []):
            a['answer_sha256'] = sha16(captures[a['method']][g['id']]['answer'])
    outputs[GOLDEN] = dumps_lines(golden)
    changed = []
    for path, text in outputs.items():
        old = open(path, encoding='utf-8').read() if os.path.exists(path) else None
        if old != text:
            changed.append(os.path.relpath(path, DATA))
            if not check:
                with open(path, 'w', encoding='utf-8', newline='\n') as f:
                    f.write(text)
    if check:
        print('out of date: %s' % ', '.join(changed) if changed else 'up to date')
        return 1 if changed else 0
    print('wrote %d captures per method; changed: %s' % (len(ids), ', '.join(changed) or 'nothing'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
