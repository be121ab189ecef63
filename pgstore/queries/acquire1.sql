/* sleeplock acquire1 */
-- Acquire one lock whose row is fast and free (migration 006): one UPDATE
-- of that row, which draws the token once the row is ours. No row: not
-- granted, nothing changed; the store then runs acquire1slow.sql, which
-- settles every case. The comment on the first line names the statement
-- in pg_stat_activity. (A fallback in the same statement, as a CTE and a
-- UNION ALL, cost a quarter of the pair's throughput: bench/README.md.)
-- The grant is dated at the statement's start, one value for acquired,
-- renewed and expires (a grant that waited for the row is dated before the
-- wait, so its lease ends no later than its TTL after the grant).
--
-- This is the grant without an event (acquire1ev.sql is the one with).
--
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 op, $7 lease µs (hold
-- or ttl), $8 ttl - lease µs.
--
-- Returns the token, acquired and expires (µs): the rest of the grant is the
-- caller's own request.
UPDATE {{schema}}.locks l
   SET ref = $2::text, kind = $3::text, token = nextval({{tokens}}), acquired = statement_timestamp(),
       renewed = statement_timestamp() - $8::bigint * interval '1 microsecond',
       expires = CASE WHEN $4::bigint > 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END,
       ttl = $4::bigint, hold = $5::bigint, op = $6::bigint
 WHERE l.name = $1::text AND l.fast AND l.ref IS NULL
RETURNING l.token, {{schema}}.micros(l.acquired), {{schema}}.micros(l.expires)
