/* sleeplock release1 */
-- Release one lock. The holder in a fast lock's row (migration 006) is
-- released by one UPDATE of that row, which leaves the row free; every
-- other case is one call of release_one() in the same statement. The
-- counts and slots of the event are left 0, and so is its Seq when the
-- row settles it: this is the release without an event (release1ev.sql
-- is the one with). The comment on the first line names the statement in
-- pg_stat_activity.
--
-- $1 name, $2 token (0: any), $3 ref.
WITH g AS (
    UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp()
     WHERE l.name = $1::text AND l.fast AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
    RETURNING l.kind, l.token, l.acquired, l.freed)
SELECT 'released'::text, 1, $1::text, 0, 0, 0, $3::text, g.kind, g.token, {{schema}}.micros(g.freed),
       {{schema}}.micros(g.freed) - {{schema}}.micros(g.acquired), 0::bigint
  FROM g
UNION ALL
SELECT * FROM {{schema}}.release_one($1::text, $2::bigint, $3::text, false, '{}'::text[])
 WHERE NOT EXISTS (SELECT 1 FROM g)
