-- Renew one lock: keep_one() (migration 006), which renews the holder in
-- the lock's row or the holder row. No row: not held, nothing changed.
--
-- $1 name, $2 token (0: any), $3 ref, $4 ttl µs (0: never expires),
-- $5 hold µs, $6 lease µs (hold or ttl), $7 ttl - lease µs.
SELECT * FROM {{schema}}.keep_one($1::text, $2::bigint, $3::text, $4::bigint, $5::bigint, $6::bigint, $7::bigint)
