/* sleeplock release_fast */
-- Releases one lock whose holder is in its fast row: one UPDATE of the row,
-- which leaves it free. No row: nothing changed; the store then sends
-- release_one(). It times the hold when its token is timed(); the store
-- sends release_fast_untimed.sql instead for a hold whose token it knows and is
-- not (255 in 256), and this statement for the others and a release by ref
-- alone. The release is dated at the statement's start, as the grant is
-- (one instant for the hold's end, its length and its bucket). Without an
-- event the slots and Seq are 0; with one, the store sends it with them in
-- their place (withEvents).
-- $1 name, $2 token (0: any), $3 ref. Returns the holder's kind and token,
-- the release's time and the hold's start (as they are: the store reads
-- them as µs, usTime, and takes the hold's length from them), the slots and
-- the Seq.
UPDATE {{schema}}.locks l SET ref = NULL, freed = statement_timestamp(),
       rels = l.rels + 1, holds = l.holds + CASE WHEN {{schema}}.timed(l.token) THEN 1 ELSE 0 END,
       hold_us = l.hold_us + CASE WHEN {{schema}}.timed(l.token)
           THEN greatest({{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.acquired), 0) ELSE 0 END,
       hb = CASE WHEN {{schema}}.timed(l.token)
           THEN {{schema}}.bump(l.hb, {{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.acquired)) ELSE l.hb END
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, l.freed, l.acquired, 0, 0::bigint
