"""Capture plan: general and adversarial cases (see build_sample_captures.py for the format)."""
from plan_dsl import ERR_502, NO_ANSWER, B, L, P  # noqa: F401
from sections import I12, I14, I29, I31, I40  # noqa: F401

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
