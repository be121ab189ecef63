/* sleeplock release_slot_untimed */
-- release_slot.sql for a hold that is not timed(), whose token the store
-- knows, as release_fast_untimed.sql is release_fast.sql's. Without an event.
-- $1 name, $2 token (not 0, not timed), $3 ref. Returns as release_fast.sql.
UPDATE {{schema}}.locks l SET xref[p.k] = NULL, freed = statement_timestamp(), rels = l.rels + 1
  FROM (SELECT array_position(x.xref, $3::text) AS k FROM {{schema}}.locks x WHERE x.name = $1::text) p
 WHERE l.name = $1::text AND l.fast AND l.xref[p.k] = $3::text AND l.xtoken[p.k] = $2::bigint
RETURNING l.xkind[p.k], l.xtoken[p.k], l.freed, l.xacquired[p.k], 0, 0::bigint
