-- resample_draws(sizes, n_boot, seed): the bootstrap's resamples, written out in SQL. It defines the
-- draws that `resample_means` (the function raglake.lake.query registers on every connection, numpy)
-- makes, draw for draw: bootstrap_ci (06_bootstrap_ci.sql) calls that function, and a test checks
-- that both give the same positions and the same means. Read it as the specification; it is slow.
--
-- For every group size n in the list `sizes` and every replicate r in 0..n_boot-1, `picks` lists the
-- n positions (1-based list indexes) drawn with replacement from a list of n values. Draws come from
-- a seeded integer hash (splitmix64, all arithmetic modulo 2^64), so the same inputs always give the
-- same interval, whatever the thread count or row order; they depend only on (seed, n, r), so groups
-- of the same size share them, and more replicates extend the fewer:
--   mix(x)       = splitmix64's output for state x: z = x + G; z = (z ^ z >> 30) * M1;
--                  z = (z ^ z >> 27) * M2; z ^ z >> 31
--   key(n, r)    = mix(mix(mix(seed) ^ n) ^ r)               (seed as 64-bit two's complement)
--   word j       = high 32 bits of mix(key + (j div 2) * G) for even j, its low 32 bits for odd j
--   position j   = (word j * n) >> 32, plus 1                (Lemire's multiply-shift, for n < 2^32)
-- with G = 0x9E3779B97F4A7C15, M1 = 0xBF58476D1CE4E5B9, M2 = 0x94D049BB133111EB (in decimal below).
CREATE OR REPLACE MACRO _wrap64(x) AS (x & 18446744073709551615::UHUGEINT)::UBIGINT;

CREATE OR REPLACE MACRO _xorshift(z, s) AS xor(z, z >> s);

CREATE OR REPLACE MACRO splitmix64(x) AS _xorshift(
    _wrap64(
        _xorshift(
            _wrap64(_xorshift(_wrap64(x::UHUGEINT + 11400714819323198485), 30)::UHUGEINT * 13787848793156543929), 27
        )::UHUGEINT
        * 10723151780598845931
    ),
    31
);

CREATE OR REPLACE MACRO resample_draws(sizes, n_boot, seed) AS TABLE
WITH size_keys AS (
    SELECT
        n,
        splitmix64(xor(splitmix64(seed_bits), n::UBIGINT)) AS size_key
    FROM (SELECT DISTINCT unnest(sizes) AS n)
    CROSS JOIN (
        -- the seed's 64 bits (two's complement)
        SELECT (((seed::HUGEINT % 18446744073709551616) + 18446744073709551616) % 18446744073709551616)::UBIGINT
            AS seed_bits
    )
),

replicates AS (
    SELECT
        size_keys.n,
        reps.r,
        splitmix64(xor(size_keys.size_key, reps.r::UBIGINT)) AS key
    FROM size_keys
    CROSS JOIN range(n_boot) AS reps (r)
),

words AS (
    SELECT
        replicates.n,
        replicates.r,
        draws.j,
        splitmix64(_wrap64(replicates.key::UHUGEINT + (draws.j // 2)::UHUGEINT * 11400714819323198485)) AS word
    FROM replicates
    CROSS JOIN LATERAL (SELECT unnest(range(replicates.n)) AS j) AS draws
),

final AS (
    SELECT
        n,
        r,
        list(
            (((CASE WHEN j % 2 = 0 THEN word >> 32 ELSE word & 4294967295 END) * n::UBIGINT) >> 32)::INTEGER + 1
            ORDER BY j
        ) AS picks
    FROM words
    GROUP BY n, r
)

SELECT * FROM final;
