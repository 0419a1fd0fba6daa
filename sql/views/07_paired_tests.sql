-- The arithmetic of compare_runs' tests (sql/compare_runs.sql has the definitions and the reasons).
--
-- paired_half_width(s2, n, c): the half-width of the interval that inverts the paired sign-flip test,
-- c·√(s2 / (n - c²)) for n paired differences with mean squared deviation s2 (divided by n) and the
-- normal critical value c; NULL (unbounded: no mean difference is rejected) when n ≤ c².
CREATE OR REPLACE MACRO paired_half_width(s2, n, c) AS (
    CASE WHEN n > c * c THEN c * sqrt(s2 / (n - c * c)) END
);

-- bh_adjust(tests): Benjamini-Hochberg adjusted p-values (q-values) of one family of tests.
-- `tests` is a list of structs {key, p}, one per test: `key` names it (any struct, handed back as is),
-- `p` is its p-value. With the m tests ranked by p (rank i = 1 for the smallest),
--   q_value(i) = min(1, min over j >= i of p(j) * m / j)
-- (R's p.adjust(p, "BH"), scipy.stats.false_discovery_control), so the tests whose q_value <= q are
-- exactly those that Benjamini-Hochberg's step-up procedure at level q rejects: every p <= R * q / m,
-- R the number rejected. Tied p-values get the same q_value, whatever order the tie is ranked in.
-- One row per test: key, p, n_tests (m), q_value.
CREATE OR REPLACE MACRO bh_adjust(tests) AS TABLE
WITH unnested AS (
    SELECT unnest(tests) AS t
),

ranked AS (
    SELECT
        t.key AS key,
        t.p AS p,
        count(*) OVER () AS n_tests,
        row_number() OVER (ORDER BY t.p) AS i
    FROM unnested
),

final AS (
    SELECT
        key,
        p,
        n_tests,
        -- the running minimum from the largest p down
        least(1.0, min(p * n_tests / i) OVER (ORDER BY i DESC ROWS UNBOUNDED PRECEDING)) AS q_value
    FROM ranked
)

SELECT * FROM final;
