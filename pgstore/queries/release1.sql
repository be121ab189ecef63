/* sleeplock release1 */
-- Release one lock: the fast path of Release, one plain statement (no
-- PL/pgSQL). When the ref's hold is the lock's only one and nobody queues,
-- it deletes the lock's row and then the holder's (the order of the slow
-- path, which locks the lock's row first), each a plain DELETE. The rest
-- (other holders, a queue, not held, a counted hold) goes to release() in
-- the last branch, which runs only when nothing was deleted: still one
-- round trip. Result rows as release()'s; the counts of the event are left
-- 0 (release1ev.sql fills them in). The comment on the first line names the
-- statement in pg_stat_activity.
--
-- The last column is the event's Seq (see acquire1.sql).
--
-- $1 name, $2 token (0: any), $3 ref.
WITH own AS (
    -- the lock's row, locked, when on this snapshot the ref's hold is the
    -- lock's only one and nobody queues
    SELECT l.name FROM {{schema}}.locks l
     WHERE l.name = $1::text
       AND EXISTS (SELECT 1 FROM {{schema}}.holders h
                    WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint)
                      AND h.count <= 1)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = $1::text AND h.ref <> $3::text)
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = $1::text)
       FOR UPDATE
), lk AS (
    -- deleted only if that is still so once the row is ours: fresh_busy
    -- (002) reads afresh, and it runs on own's row, so after the lock
    DELETE FROM {{schema}}.locks l USING own o
     WHERE l.name = o.name AND NOT {{schema}}.fresh_busy(o.name, $3::text)
    RETURNING l.name
), del AS (
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint) AND h.count <= 1
       AND EXISTS (SELECT 1 FROM lk)
    RETURNING h.kind, h.token, h.acquired, clock_timestamp() AS t
)
SELECT u.*, CASE WHEN u.ev = 'released' THEN nextval({{seqs}}) ELSE 0 END
  FROM (SELECT 'released'::text AS ev, 1, $1::text, 0, 0, 0, $3::text, r.kind, r.token, {{schema}}.micros(r.t),
               {{schema}}.micros(r.t) - {{schema}}.micros(r.acquired)
          FROM del r
        UNION ALL
        SELECT b.* FROM {{schema}}.release(ARRAY[$1::text], ARRAY[$2::bigint], $3::text, NULL::bigint, false) b
         WHERE NOT EXISTS (SELECT 1 FROM del)) u
