/* sleeplock release_fast */
-- Releases one lock whose holder is in its fast row: one UPDATE of the row,
-- which leaves it free. No row: nothing changed; the store then sends
-- release_one(). $4 says whether the hold is timed: the store sends this
-- statement with the hold's token only, and passes timed() of it, or true
-- when it samples the lock by time (sampleDue); an untimed hold (255 in
-- 256) costs the test of $4 and no more. The release
-- is dated at the statement's start, as the grant is (one instant for the
-- hold's end, its length and its bucket). Without an event the slots and
-- Seq are 0; with one, the store sends it with them in their place
-- (withEvents).
-- $1 name, $2 token (0: any), $3 ref, $4 timed. Returns the holder's kind and token,
-- the release's time and the hold's start (as they are: the store reads
-- them as µs, usTime, and takes the hold's length from them), the slots and
-- the Seq.
UPDATE {{schema}}.locks l SET ref = NULL, freed = statement_timestamp(), rels = l.rels + 1,
       holds = l.holds + CASE WHEN $4::boolean THEN 1 ELSE 0 END,
       hold_us = l.hold_us + CASE WHEN $4::boolean
           THEN greatest({{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.acquired), 0) ELSE 0 END,
       hb = CASE WHEN $4::boolean
           THEN {{schema}}.bump(l.hb, {{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.acquired)) ELSE l.hb END
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, l.freed, l.acquired, 0, 0::bigint
