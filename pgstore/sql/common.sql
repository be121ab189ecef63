-- Helpers: times, name patterns and definitions' slots.

-- micros: microseconds since the epoch, 0 for NULL. STABLE, as extract()
-- from a timestamptz is, so that the planner inlines it.
CREATE OR REPLACE FUNCTION {{schema}}.micros(t timestamp with time zone)
 RETURNS bigint
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $sleeplock$
    SELECT coalesce((extract(epoch FROM t) * 1000000)::bigint, 0)
$sleeplock$;

-- next_token: the next fencing token: the tokens sequence, raised by
-- (timeline − 1) · 2^44. A standby promoted to primary starts a new, higher
-- timeline, so every token it draws is greater than any its old primary
-- drew, also one whose commit was never replicated (an asynchronous
-- standby): tokens grow across failovers while the sequence stays below
-- 2^44 (17.6 trillion tokens). The timeline is the server's WAL insertion
-- timeline, which a promotion changes at once.
CREATE OR REPLACE FUNCTION {{schema}}.next_token()
 RETURNS bigint
 LANGUAGE sql
 VOLATILE
AS $sleeplock$
    SELECT nextval({{tokens}})
           + ((('x' || left(pg_walfile_name(pg_current_wal_insert_lsn()), 8))::bit(32)::bigint - 1) << 44)
$sleeplock$;

-- patterns: the names that could define n, most specific first: the name
-- itself, then its families ("a/b/c" → "a/b/c", "a/b/*", "a/*").
CREATE OR REPLACE FUNCTION {{schema}}.patterns(n text)
 RETURNS text[]
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
DECLARE
    out text[] := ARRAY[n];
    p   integer;
BEGIN
    FOR p IN REVERSE length(n) - 1 .. 2 LOOP
        IF substr(n, p, 1) = '/' THEN
            out := out || (left(n, p - 1) || '/*');
        END IF;
    END LOOP;
    RETURN out;
END
$sleeplock$;

-- slots_in: the slots of the definition of a name: the first of p_pats
-- (the name, then its families, most specific first) that is defined; NULL
-- when none is. One index lookup per pattern tried.
CREATE OR REPLACE FUNCTION {{schema}}.slots_in(p_pats text[])
 RETURNS integer
 LANGUAGE plpgsql
 STABLE
AS $sleeplock$
DECLARE
    v_pat   text;
    v_slots integer;
BEGIN
    FOREACH v_pat IN ARRAY p_pats LOOP
        SELECT d.slots INTO v_slots FROM {{schema}}.defs d WHERE d.name = v_pat;
        IF FOUND THEN
            RETURN v_slots;
        END IF;
    END LOOP;
    RETURN NULL;
END
$sleeplock$;

-- free_slot: the lowest slot number of 1..p_slots that no holder row of
-- lock p_name has, NULL when none is free. Read from the holder rows
-- (slot 1, or the number after a holder's), through the index on (lock,
-- slot): its cost grows with the holders, not with the slots, as a scan
-- of 1..p_slots would (0.23 s for a lock of 1,000,000 slots).
CREATE OR REPLACE FUNCTION {{schema}}.free_slot(p_name text, p_slots integer)
 RETURNS integer
 LANGUAGE sql
 STABLE
AS $sleeplock$
    SELECT min(c.s)
      FROM (SELECT 1 AS s UNION ALL SELECT h.slot + 1 FROM {{schema}}.holders h WHERE h.lock = p_name) c
     WHERE c.s <= p_slots
       AND NOT EXISTS (SELECT 1 FROM {{schema}}.holders x WHERE x.lock = p_name AND x.slot = c.s)
$sleeplock$;

-- need: the slots a weight takes of a lock of p_slots slots (-1, an
-- exclusive hold: every slot). IMMUTABLE SQL, inlined.
CREATE OR REPLACE FUNCTION {{schema}}.need(p_weight integer, p_slots integer)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $sleeplock$
    SELECT CASE WHEN p_weight = -1 THEN p_slots ELSE p_weight END
$sleeplock$;
