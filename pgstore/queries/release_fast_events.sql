/* sleeplock release_fast_events */
-- release_fast.sql that also reads the slots of the lock's definition and
-- draws the event's Seq.
--
-- $1 … $3 as release_fast.sql, $4 the patterns of the name.
UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp()
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, {{schema}}.micros(l.freed), {{schema}}.micros(l.freed) - {{schema}}.micros(l.acquired),
          {{schema}}.slots_in($4::text::text[]), nextval({{seqs}})
