/* sleeplock release1ev */
-- Release one lock, with what the event needs: release1.sql (see there)
-- that also counts, on its snapshot, the slots of the lock's definition,
-- the holders left and the live waiters. A separate statement rather than
-- a flag: every subplan of a plan is set up at each execution, run or not.
--
-- $1 name, $2 token (0: any), $3 ref, $4 the patterns of the name (the
-- name, then its families, most specific first).
WITH lk AS (
    DELETE FROM {{schema}}.locks l
     WHERE l.name = $1::text
       AND EXISTS (SELECT 1 FROM {{schema}}.holders h
                    WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint)
                      AND h.count <= 1)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = $1::text AND h.ref <> $3::text)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = $1::text)
    RETURNING l.name
), del AS (
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint) AND h.count <= 1
       AND EXISTS (SELECT 1 FROM lk)
    RETURNING h.kind, h.token, h.acquired, clock_timestamp() AS t
)
SELECT 'released'::text, 1, $1::text,
       (SELECT (array_agg(d.slots ORDER BY array_position($4::text::text[], d.name)))[1]
          FROM {{schema}}.defs d WHERE d.name = ANY ($4::text::text[])),
       (SELECT count(*)::int FROM {{schema}}.holders h WHERE h.lock = $1::text AND h.ref <> $3::text),
       (SELECT count(*)::int FROM {{schema}}.queue q JOIN {{schema}}.waiters w ON w.ticket = q.ticket
         WHERE q.lock = $1::text AND w.expires > r.t),
       $3::text, r.kind, r.token, {{schema}}.micros(r.t), {{schema}}.micros(r.t) - {{schema}}.micros(r.acquired)
  FROM del r
UNION ALL
SELECT b.* FROM {{schema}}.release(ARRAY[$1::text], ARRAY[$2::bigint], $3::text, NULL::bigint, true) b
 WHERE NOT EXISTS (SELECT 1 FROM del)
