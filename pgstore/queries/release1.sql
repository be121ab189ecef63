/* sleeplock release1 */
-- Release one lock whose holder is in its fast row (migration 006): one
-- UPDATE of that row, which leaves it free. No row: nothing changed; the
-- store then runs release1slow.sql. The counts, slots and Seq of the event
-- are left 0: this is the release without an event (release1ev.sql is the
-- one with). The comment on the first line names the statement in
-- pg_stat_activity.
--
-- $1 name, $2 token (0: any), $3 ref. Returns the holder's kind and token, the
-- release's time and the hold's length (µs), the slots and the Seq.
UPDATE {{schema}}.locks l SET ref = NULL, freed = clock_timestamp()
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND ($2::bigint = 0 OR l.token = $2::bigint)
RETURNING l.kind, l.token, {{schema}}.micros(l.freed), {{schema}}.micros(l.freed) - {{schema}}.micros(l.acquired),
          0, 0::bigint
