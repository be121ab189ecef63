/* sleeplock release1ev */
-- Release one lock, with what the event needs: release1.sql that also
-- reads the slots of the lock's definition.
--
-- $1 name, $2 token (0: any), $3 ref, $4 the patterns of the name (the
-- name, then its families, most specific first).
WITH g AS (
    UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp()
     WHERE l.name = $1::text AND l.fast AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
    RETURNING l.kind, l.token, l.acquired, l.freed)
SELECT 'released'::text, 1, $1::text, {{schema}}.slots_in($4::text::text[]), 0, 0, $3::text, g.kind, g.token,
       {{schema}}.micros(g.freed), {{schema}}.micros(g.freed) - {{schema}}.micros(g.acquired), nextval({{seqs}})
  FROM g
UNION ALL
SELECT * FROM {{schema}}.release_one($1::text, $2::bigint, $3::text, true, $4::text::text[])
 WHERE NOT EXISTS (SELECT 1 FROM g)
