/* sleeplock release1ev */
-- Release one lock, with what the event needs: release1.sql that also
-- reads the slots of the lock's definition.
--
-- $1 name, $2 token (0: any), $3 ref, $4 the patterns of the name (the
-- name, then its families, most specific first).
SELECT * FROM {{schema}}.release_one($1::text, $2::bigint, $3::text, true, $4::text::text[])
