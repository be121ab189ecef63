/* sleeplock release1 */
-- Release one lock: one call of release_one() (migration 003), which
-- deletes the ref's hold and the lock's row when that hold is the lock's
-- only one and nobody queues, and hands every other case to release(). The
-- counts and slots of the event are left 0 (release1ev.sql fills in the
-- slots). The comment on the first line names the statement in
-- pg_stat_activity.
--
-- $1 name, $2 token (0: any), $3 ref.
SELECT * FROM {{schema}}.release_one($1::text, $2::bigint, $3::text, false, '{}'::text[])
