/* sleeplock release1ev */
-- Release one lock, with what the event needs: release1.sql (see there)
-- that also counts the slots of the lock's definition (on its snapshot),
-- the holders left and the live waiters (afresh: fresh_counts in 002). A
-- separate statement rather than a flag: every subplan of a plan is set up
-- at each execution, run or not.
--
-- The last column is the event's Seq (see acquire1.sql).
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
       AND NOT {{schema}}.fresh_busy($1::text, $3::text) -- again once the row is ours (002)
    RETURNING l.name
), del AS (
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint) AND h.count <= 1
       AND EXISTS (SELECT 1 FROM lk)
    RETURNING h.kind, h.token, h.acquired, clock_timestamp() AS t
)
SELECT u.*, CASE WHEN u.ev = 'released' THEN nextval({{seqs}}) ELSE 0 END
  FROM (SELECT 'released'::text AS ev, 1, $1::text,
               (SELECT (array_agg(d.slots ORDER BY array_position($4::text::text[], d.name)))[1]
                  FROM {{schema}}.defs d WHERE d.name = ANY ($4::text::text[])),
               c.running, c.waiting,
               $3::text, r.kind, r.token, {{schema}}.micros(r.t), {{schema}}.micros(r.t) - {{schema}}.micros(r.acquired)
          FROM del r, {{schema}}.fresh_counts($1::text) c
        UNION ALL
        SELECT b.* FROM {{schema}}.release(ARRAY[$1::text], ARRAY[$2::bigint], $3::text, NULL::bigint, true) b
         WHERE NOT EXISTS (SELECT 1 FROM del)) u
