/* sleeplock release_slot */
-- Releases a slot of a lock whose row is fast, in slot mode: one UPDATE of
-- the row, which frees the caller's slot. No row: nothing changed; the
-- store then sends release_one(). The slot is found on the statement's
-- snapshot and checked again on the row it updates: slots do not move
-- while the row is fast (a spill clears fast). It times the hold when $4
-- says so, as release_fast.sql does. Without an event.
-- $1 … $4 as release_fast.sql; returns the same columns.
UPDATE {{schema}}.locks l SET xref[p.k] = NULL, freed = statement_timestamp(), rels = l.rels + 1,
       holds = l.holds + CASE WHEN $4::boolean THEN 1 ELSE 0 END,
       hold_us = l.hold_us + CASE WHEN $4::boolean
           THEN greatest({{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.xacquired[p.k]), 0) ELSE 0 END,
       hb = CASE WHEN $4::boolean
           THEN {{schema}}.bump(l.hb, {{schema}}.micros(statement_timestamp()) - {{schema}}.micros(l.xacquired[p.k]))
           ELSE l.hb END
  FROM (SELECT array_position(x.xref, $3::text) AS k FROM {{schema}}.locks x WHERE x.name = $1::text) p
 WHERE l.name = $1::text AND l.fast AND l.xref[p.k] = $3::text AND ($2::bigint = 0 OR l.xtoken[p.k] = $2::bigint)
RETURNING l.xkind[p.k], l.xtoken[p.k], l.freed, l.xacquired[p.k], 0, 0::bigint
