"""Capture plan: factual and reasoning cases (see build_sample_captures.py for the format)."""
from plan_dsl import ERR_502, NO_ANSWER, B, L, P  # noqa: F401
from sections import I12, I14, I29, I31, I40  # noqa: F401

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
