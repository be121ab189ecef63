/* sleeplock release_fast */
-- Releases one lock whose holder is in its fast row: one UPDATE of the row,
-- which leaves it free. No row: nothing changed; the store then sends
-- release_one(). Without an event the slots and Seq are 0; with one, the
-- store sends it with them in their place (withEvents).
-- $1 name, $2 token (0: any), $3 ref. Returns the holder's kind and token,
-- the release's time and the hold's length (µs), the slots and the Seq.
UPDATE {{schema}}.locks l SET ref = NULL, freed = c.t,
       rels = l.rels + 1, holds = l.holds + CASE WHEN {{schema}}.timed(l.token) THEN 1 ELSE 0 END,
       hold_us = l.hold_us + CASE WHEN {{schema}}.timed(l.token)
           THEN greatest({{schema}}.micros(c.t) - {{schema}}.micros(l.acquired), 0) ELSE 0 END,
       hb = CASE WHEN {{schema}}.timed(l.token) THEN {{schema}}.bump(l.hb, {{schema}}.micros(c.t) - {{schema}}.micros(l.acquired)) ELSE l.hb END
  FROM (SELECT clock_timestamp() AS t) c
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, {{schema}}.micros(l.freed), {{schema}}.micros(l.freed) - {{schema}}.micros(l.acquired),
          0, 0::bigint
