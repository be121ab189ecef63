/* sleeplock release_fast_events */
-- release_fast.sql that also reads the slots of the lock's definition and
-- draws the event's Seq.
-- $1 … $3 as release_fast.sql, $4 the patterns of the name.
UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp(),
       rels = l.rels + 1, holds = l.holds + 1, hold_us = l.hold_us + greatest({{schema}}.micros(clock_timestamp()) - {{schema}}.micros(l.acquired), 0),
       hb[{{schema}}.bucket({{schema}}.micros(clock_timestamp()) - {{schema}}.micros(l.acquired))] = coalesce(l.hb[{{schema}}.bucket({{schema}}.micros(clock_timestamp()) - {{schema}}.micros(l.acquired))], 0) + 1
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, {{schema}}.micros(l.freed), {{schema}}.micros(l.freed) - {{schema}}.micros(l.acquired),
          {{schema}}.slots_in($4::text::text[]), nextval({{seqs}})
