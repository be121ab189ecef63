-- Whether ref holds one lock (with the token, where not 0): one read of
-- the lock's row and of its holder rows (migration 006: the holder may be
-- in either; one statement, so one snapshot, sees it in one of them).
--
-- $1 name, $2 token (0: any), $3 ref.
SELECT h.ok IS NOT NULL, {{schema}}.micros(c.t), {{schema}}.micros(h.renewed), {{schema}}.micros(h.expires)
  FROM (SELECT clock_timestamp() AS t) c
  LEFT JOIN LATERAL (
        SELECT true AS ok, l.renewed, l.expires FROM {{schema}}.locks l
         WHERE l.name = $1::text AND l.fast AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
        UNION ALL
        SELECT true, x.renewed, x.expires FROM {{schema}}.holders x
         WHERE x.lock = $1::text AND x.ref = $3::text AND ($2::bigint = 0 OR x.token = $2::bigint)
        LIMIT 1) h ON true
