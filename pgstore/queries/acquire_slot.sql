/* sleeplock acquire_slot */
-- Grants a slot of a lock of several slots whose row is fast, in slot
-- mode: one UPDATE of the row's arrays at the first free slot, which draws
-- the token once the row is ours. No row: nothing changed (the row is in
-- scalar mode or slow, every slot is taken, or the caller holds one); the
-- store then sends acquire_one(). A racing grant of the same slot makes
-- PostgreSQL evaluate the statement again on the row's latest version
-- (READ COMMITTED): it takes the next free slot, or none. Without an event.
-- $1 … $8 as acquire_fast.sql. Returns the token, acquired and expires (as
-- acquire_fast.sql).
UPDATE {{schema}}.locks l
   SET xref[array_position(l.xref, NULL)] = $2::text,
       xkind[array_position(l.xref, NULL)] = $3::text,
       xtoken[array_position(l.xref, NULL)] = {{schema}}.next_token(),
       xacquired[array_position(l.xref, NULL)] = statement_timestamp(),
       xrenewed[array_position(l.xref, NULL)] = statement_timestamp() - $8::bigint * interval '1 microsecond',
       xexpires[array_position(l.xref, NULL)] =
           CASE WHEN $4::bigint > 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END,
       xttl[array_position(l.xref, NULL)] = $4::bigint,
       xhold[array_position(l.xref, NULL)] = $5::bigint,
       xop[array_position(l.xref, NULL)] = $6::bigint,
       acqs = l.acqs + 1
 WHERE l.name = $1::text AND l.fast AND array_position(l.xref, NULL) IS NOT NULL
   AND array_position(l.xref, $2::text) IS NULL
RETURNING l.xtoken[array_position(l.xref, $2::text)], statement_timestamp(),
          l.xexpires[array_position(l.xref, $2::text)]
