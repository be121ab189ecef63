-- Renew one lock: a conditional UPDATE on (lock, ref, token), never an
-- upsert. No row: not held, nothing changed.
--
-- $1 name, $2 token (0: any), $3 ref, $4 ttl µs (0: never expires),
-- $5 hold µs, $6 lease µs (hold or ttl), $7 ttl - lease µs.
UPDATE {{schema}}.holders h
   SET ttl = $4::bigint, hold = $5::bigint,
       expires = CASE WHEN $4::bigint > 0 THEN clock_timestamp() + $6::bigint * interval '1 microsecond' END,
       renewed = CASE WHEN $4::bigint > 0 THEN clock_timestamp() - $7::bigint * interval '1 microsecond'
                      ELSE h.acquired END
 WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint)
RETURNING true, {{schema}}.micros(clock_timestamp()), {{schema}}.micros(h.expires)
