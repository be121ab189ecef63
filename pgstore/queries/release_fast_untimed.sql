/* sleeplock release_fast_untimed */
-- release_fast.sql for a hold that is not timed() (255 in 256), whose token
-- the store knows: it counts the release and writes nothing else, so it
-- costs the server less than release_fast.sql, whose hold-timing columns
-- cost their expressions on every call, taken or not. The store never
-- sends it with a timed token (release.go: timed), so every timed hold is
-- timed; and a hold of another token is not its row's (no row, nothing
-- changed). Without an event, or with one, as release_fast.sql.
-- $1 name, $2 token (not 0, not timed), $3 ref. Returns as release_fast.sql.
UPDATE {{schema}}.locks l SET ref = NULL, freed = statement_timestamp(), rels = l.rels + 1
 WHERE l.name = $1::text AND l.fast AND l.xref IS NULL AND l.ref = $3::text AND l.token = $2::bigint
RETURNING l.kind, l.token, l.freed, l.acquired, 0, 0::bigint
