/* sleeplock held_one */
-- Whether ref holds one lock (with the token, where not 0): one read of
-- the lock's row (scalar or slot mode) and of its holder rows; one
-- statement, so one snapshot, sees the holder in one of them.
-- $1 name, $2 token (0: any), $3 ref. Returns held, now, renewed, expires.
SELECT h.ok IS NOT NULL, {{schema}}.micros(c.t), {{schema}}.micros(h.renewed), {{schema}}.micros(h.expires)
  FROM (SELECT clock_timestamp() AS t) c
  LEFT JOIN LATERAL (
        SELECT true AS ok, l.renewed, l.expires FROM {{schema}}.locks l
         WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
        UNION ALL
        SELECT true, l.xrenewed[p.k], l.xexpires[p.k]
          FROM {{schema}}.locks l CROSS JOIN LATERAL (SELECT array_position(l.xref, $3::text) AS k) p
         WHERE l.name = $1::text AND l.fast AND p.k IS NOT NULL AND ($2::bigint = 0 OR l.xtoken[p.k] = $2::bigint)
        UNION ALL
        SELECT true, x.renewed, x.expires FROM {{schema}}.holders x
         WHERE x.lock = $1::text AND x.ref = $3::text AND ($2::bigint = 0 OR x.token = $2::bigint)
        LIMIT 1) h ON true
