/* sleeplock release1 */
-- Release one lock: the fast path of Release, one plain statement (no
-- PL/pgSQL). A hold that is not counted goes with a plain DELETE, and the
-- lock's row with it when the lock is idle. The rest (not held, a counted
-- hold) goes to release() in the last branch, which runs only when nothing
-- was deleted: still one round trip. Result rows as release()'s; the
-- counts of the event are left 0 (release1ev.sql fills them in). The
-- comment on the first line names the statement in pg_stat_activity.
--
-- $1 name, $2 token (0: any), $3 ref.
WITH del AS (
    DELETE FROM {{schema}}.holders h
     WHERE h.lock = $1::text AND h.ref = $3::text AND ($2::bigint = 0 OR h.token = $2::bigint) AND h.count <= 1
    RETURNING h.kind, h.token, h.acquired, clock_timestamp() AS t
), gone AS (
    -- Forget the lock's row if the lock is idle. This statement holds the
    -- holder row already; a slow-path call locks the lock row first and the
    -- holder row next, so waiting for the lock row here could deadlock. A
    -- row it skips is forgotten by whoever holds it, or stays as harmless
    -- garbage.
    DELETE FROM {{schema}}.locks l
     WHERE l.name = (SELECT x.name FROM {{schema}}.locks x
                      WHERE x.name = $1::text AND EXISTS (SELECT 1 FROM del)
                        AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders h WHERE h.lock = x.name AND h.ref <> $3::text)
                        AND NOT EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = x.name)
                        FOR UPDATE SKIP LOCKED)
)
SELECT 'released'::text, 1, $1::text, 0, 0, 0, $3::text, r.kind, r.token, {{schema}}.micros(r.t),
       {{schema}}.micros(r.t) - {{schema}}.micros(r.acquired)
  FROM del r
UNION ALL
SELECT b.* FROM {{schema}}.release(ARRAY[$1::text], ARRAY[$2::bigint], $3::text, NULL::bigint, false) b
 WHERE NOT EXISTS (SELECT 1 FROM del)
