/* sleeplock acquire_fast */
-- Grants one lock whose row is fast and free: one UPDATE of the row (a HOT
-- update), which draws the token once the row is ours. No row: not
-- granted, nothing changed; the store then sends acquire_one(). The grant
-- is dated at the statement's start, one value for acquired, renewed and
-- expires. With an event, the store sends it with the slots of the lock's
-- definition and the Seq added to its RETURNING list (withEvents).
-- $1 name, $2 ref, $3 kind, $4 ttl µs, $5 hold µs, $6 op, $7 lease µs (hold
-- or ttl), $8 ttl - lease µs. Returns the token, acquired and expires (as
-- they are: the store reads them as µs, usTime; converting them here would
-- cost the statement a numeric function call each).
UPDATE {{schema}}.locks l
   SET ref = $2::text, kind = $3::text, token = {{schema}}.next_token(), acquired = statement_timestamp(),
       renewed = statement_timestamp() - $8::bigint * interval '1 microsecond',
       expires = CASE WHEN $4::bigint > 0 THEN statement_timestamp() + $7::bigint * interval '1 microsecond' END,
       ttl = $4::bigint, hold = $5::bigint, op = $6::bigint, acqs = l.acqs + 1
 WHERE l.name = $1::text AND l.fast AND l.ref IS NULL
RETURNING l.token, l.acquired, l.expires
