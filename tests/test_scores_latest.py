"""scores_latest (sql/views/10_scores_latest.sql) picks, for every run × case × metric, the row of the
newest scoring (scored_at, then scoring_id): checked against the row-by-row definition on random lakes
with first scorings, whole re-scorings, partial re-scorings and ties in time."""

from __future__ import annotations

import datetime as dt

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from raglake.lake.query import SQL_DIR

VIEW = SQL_DIR.joinpath("views", "10_scores_latest.sql").read_text(encoding="utf-8")
REFERENCE = """
SELECT * EXCLUDE (recency) FROM (
    SELECT *, row_number() OVER (PARTITION BY run_id, case_id, metric ORDER BY scored_at DESC, scoring_id DESC)
        AS recency
    FROM scores
) WHERE recency = 1
"""
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)

scoring = st.tuples(
    st.sampled_from(["r1", "r2"]),  # run
    st.lists(st.sampled_from(["m1", "m2", "m3"]), min_size=1, max_size=3, unique=True),  # its metrics
    st.integers(0, 3),  # minutes after T0 (ties happen)
    st.one_of(st.none(), st.sets(st.integers(0, 5), max_size=6)),  # None: every case; else these cases
)


def lake_with(scorings: list[tuple]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.sql("CREATE TABLE cases (run_id VARCHAR, case_id VARCHAR)")
    con.sql("INSERT INTO cases SELECT r, 'c' || i FROM (VALUES ('r1'), ('r2')) t(r), range(6) s(i)")
    con.sql(
        "CREATE TABLE scores (run_id VARCHAR, case_id VARCHAR, metric VARCHAR, value DOUBLE, status VARCHAR,"
        " scoring_id VARCHAR, scored_at TIMESTAMPTZ)"
    )
    rows = []
    for number, (run, metrics, minutes, subset) in enumerate(scorings):
        for metric in metrics:
            for i in sorted(subset) if subset is not None else range(6):
                rows.append(
                    (run, f"c{i}", metric, float(number), "ok", f"s-{number:02d}", T0 + dt.timedelta(minutes=minutes))
                )
    if rows:
        con.executemany("INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    con.sql(VIEW)
    return con


def differ(con: duckdb.DuckDBPyConnection) -> int:
    got, want = "SELECT * FROM scores_latest", REFERENCE
    return con.sql(f"SELECT count(*) FROM (({got} EXCEPT ALL {want}) UNION ALL ({want} EXCEPT ALL {got}))").fetchall()[
        0
    ][0]


@settings(max_examples=120, deadline=None)
@given(st.lists(scoring, max_size=6))
def test_scores_latest_is_the_row_by_row_newest(scorings):
    assert differ(lake_with(scorings)) == 0


def test_a_partial_rescoring_keeps_the_older_rows_of_the_cases_it_left_out():
    con = lake_with([("r1", ["m1"], 0, None), ("r1", ["m1"], 1, {0, 1})])
    got = dict(con.sql("SELECT case_id, scoring_id FROM scores_latest WHERE metric = 'm1'").fetchall())
    assert got == {"c0": "s-01", "c1": "s-01", "c2": "s-00", "c3": "s-00", "c4": "s-00", "c5": "s-00"}


def test_a_whole_rescoring_replaces_every_row_and_ties_go_to_the_larger_scoring_id():
    con = lake_with([("r1", ["m1"], 2, None), ("r1", ["m1"], 2, None), ("r1", ["m1"], 1, None)])
    assert con.sql("SELECT DISTINCT scoring_id FROM scores_latest").fetchall() == [("s-01",)]
    assert con.sql("SELECT count(*) FROM scores_latest").fetchall()[0][0] == 6
