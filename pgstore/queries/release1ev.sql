/* sleeplock release1ev */
-- Release one lock whose holder is in its fast row, with what the event
-- needs: release1.sql that also reads the slots of the lock's definition
-- and draws the event's Seq.
--
-- $1 name, $2 token (0: any), $3 ref, $4 the patterns of the name (the
-- name, then its families, most specific first).
UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp()
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, {{schema}}.micros(l.freed), {{schema}}.micros(l.freed) - {{schema}}.micros(l.acquired),
          {{schema}}.slots_in($4::text::text[]), nextval({{seqs}})
