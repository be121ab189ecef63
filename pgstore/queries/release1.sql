/* sleeplock release1 */
-- Release one lock: the fast path of Release, one plain statement (no
-- PL/pgSQL). A hold that is not counted, of a lock that has no row in the
-- locks table (no queue, no slow-path work under way), goes with a plain
-- DELETE. The rest (not held, a counted hold, a lock with a row) goes to
-- release() in the last branch, which runs only when nothing was deleted:
-- still one round trip. Result rows as release()'s; the counts of the event
-- are left 0 (release1ev.sql fills them in). The comment on the first line
-- names the statement in pg_stat_activity.
--
-- $1 name, $2 token (0: any), $3 ref.
WITH del AS (
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint) AND h.count <= 1
       -- A lock with a row in locks is in slow-path hands (a queue, a
       -- takeover, several locks at once): release() locks that row first,
       -- then the holder's, and forgets the row when the lock is idle.
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.locks l WHERE l.name = $1::text)
    RETURNING h.kind, h.token, h.acquired, clock_timestamp() AS t
)
SELECT 'released'::text, 1, $1::text, 0, 0, 0, $3::text, r.kind, r.token, {{schema}}.micros(r.t),
       {{schema}}.micros(r.t) - {{schema}}.micros(r.acquired)
  FROM del r
UNION ALL
SELECT b.* FROM {{schema}}.release(ARRAY[$1::text], ARRAY[$2::bigint], $3::text, NULL::bigint, false) b
 WHERE NOT EXISTS (SELECT 1 FROM del)
