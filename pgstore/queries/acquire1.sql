/* sleeplock acquire1 */
-- Acquire one lock: TryAcquire and the first step of Acquire, without
-- StaleAfter. A lock whose row is fast and free (migration 006) is granted
-- by one UPDATE of that row, which draws the token once the row is ours;
-- every other case is one call of acquire_slow() in the same statement.
-- The comment on the first line names the statement in pg_stat_activity.
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 counted, $7 wait,
-- $8 op, $9 waiter ttl µs, $10 the patterns of the name (the name, then its
-- families, most specific first), $11 lease µs (hold or ttl), $12 ttl - lease µs,
-- $13 the store's node (migration 005: a waiter's lease is its node's),
-- $14 whether the event is wanted (its slots and Seq; without it, no Seq is
-- drawn).
WITH c AS (SELECT clock_timestamp() AS t),
g AS (
    UPDATE {{schema}}.locks l
       SET ref = $2::text, kind = $3::text, token = nextval({{tokens}}), acquired = c.t,
           renewed = c.t - $12::bigint * interval '1 microsecond',
           expires = CASE WHEN $4::bigint > 0 THEN c.t + $11::bigint * interval '1 microsecond' END,
           ttl = $4::bigint, hold = $5::bigint, op = $8::bigint
      FROM c
     WHERE l.name = $1::text AND l.fast AND l.ref IS NULL
    RETURNING l.token, l.acquired, l.expires)
SELECT 'granted'::text, 1, $1::text,
       CASE WHEN $14::boolean THEN {{schema}}.slots_in($10::text::text[]) ELSE 0 END, 1, 0, $2::text, $3::text,
       g.token, {{schema}}.micros(g.acquired), {{schema}}.micros(g.expires), 0::bigint, false, 0::bigint,
       $4::bigint, $5::bigint, CASE WHEN $14::boolean THEN nextval({{seqs}}) ELSE 0 END
  FROM g
UNION ALL
SELECT * FROM {{schema}}.acquire_slow($1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::boolean, $7::boolean,
                                      $8::bigint, $9::bigint, $10::text::text[], $11::bigint, $12::bigint,
                                      $13::bigint)
 WHERE NOT EXISTS (SELECT 1 FROM g)
