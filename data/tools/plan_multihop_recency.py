"""Capture plan: multi_hop and recency_conflict cases (see build_sample_captures.py for the format)."""
from plan_dsl import ERR_502, NO_ANSWER, B, L, P  # noqa: F401
from sections import I12, I14, I29, I31, I40  # noqa: F401

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
