/* sleeplock acquire_weighted */
-- Grants a weighted hold (weight k ≠ 1, -1: every slot) of one lock whose
-- row is fast and holds nothing: one UPDATE of the row (a HOT update),
-- which makes it scalar mode (the slot arrays, all free, NULL) with the
-- caller as its holder of weight k (locks.weight, and wacqs = acqs: see
-- migrations/001_init.sql). k is need($10, the slots of the name's
-- definition), which must not be more than those slots. The token is
-- drawn once the row is ours, as acquire_fast.sql draws it. No row: not
-- granted, nothing changed (the row is held, slow, or missing, or k is
-- too heavy); the store then sends acquire_one(). Its release is
-- release_fast.sql. With an event, the store sends it with the slots and
-- the Seq added to its RETURNING list (withEvents).
-- $1 … $8 as acquire_fast.sql, $9 the name's patterns, $10 the weight.
-- Returns the token, acquired and expires (as acquire_fast.sql), and k.
UPDATE {{schema}}.locks l
   SET ref = $2::text, kind = $3::text, token = {{schema}}.next_token(), acquired = statement_timestamp(),
       renewed = statement_timestamp() - $8::bigint * interval '1 microsecond',
       expires = CASE WHEN $4::bigint > 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END,
       ttl = $4::bigint, hold = $5::bigint, op = $6::bigint, acqs = l.acqs + 1, weight = w.k, wacqs = l.acqs + 1,
       xref = NULL, xkind = NULL, xtoken = NULL, xacquired = NULL, xrenewed = NULL, xexpires = NULL, xttl = NULL,
       xhold = NULL, xop = NULL
  FROM (SELECT {{schema}}.need($10::integer, d.n) AS k, d.n
          FROM (SELECT {{schema}}.slots_in($9::text::text[]) AS n) d) w
 WHERE l.name = $1::text AND l.fast AND w.k <= w.n
   AND ((l.xref IS NULL AND l.ref IS NULL) OR (l.xref IS NOT NULL AND cardinality(array_remove(l.xref, NULL)) = 0))
RETURNING l.token, l.acquired, l.expires, l.weight
