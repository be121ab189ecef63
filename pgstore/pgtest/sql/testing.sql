-- For tests only (of pgstore, or of code that uses it), which must make a
-- TTL pass without waiting. No operation of the store calls these, and
-- Migrate never installs them: advance() expires every lease, so it has no
-- place in a production schema. Tests execute this file themselves
-- (pgtest.TestFunctions), after Migrate, which would drop them.

-- advance: dates every lease and waiter of the schema back by p_us
-- microseconds, as if that much time had passed on the database's clock.
-- It changes nothing else: waiters' own liveness leases are left as they
-- are.
CREATE OR REPLACE FUNCTION {{schema}}.advance(p_us bigint) RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    d interval := p_us * interval '1 microsecond';
BEGIN
    UPDATE {{schema}}.holders SET acquired = acquired - d, renewed = renewed - d, expires = expires - d;
    UPDATE {{schema}}.locks
       SET acquired = acquired - d, renewed = renewed - d, expires = expires - d, freed = freed - d,
           xacquired = {{schema}}.shift(xacquired, p_us), xrenewed = {{schema}}.shift(xrenewed, p_us),
           xexpires = {{schema}}.shift(xexpires, p_us)
     WHERE name IN (SELECT name FROM {{schema}}.locks WHERE fast FOR UPDATE SKIP LOCKED);
    UPDATE {{schema}}.waiters SET since = since - d;
END
$sleeplock$;

-- shift: the times t, each p_us microseconds earlier.
CREATE OR REPLACE FUNCTION {{schema}}.shift(t timestamptz[], p_us bigint) RETURNS timestamptz[]
LANGUAGE sql IMMUTABLE AS $sleeplock$
    SELECT array_agg(u.x - p_us * interval '1 microsecond' ORDER BY u.o) FROM unnest(t) WITH ORDINALITY u(x, o)
$sleeplock$;
