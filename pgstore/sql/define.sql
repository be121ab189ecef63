-- Definitions: Define and Resize. Both take the definitions' advisory lock
-- (defs_key()) exclusively for their transaction, and end by spilling the
-- rows in slot mode whose arrays no longer have their lock's slots
-- (respill()). A grant that turns a row to slot mode takes the same lock
-- shared before the row (acquire_one()), so it never sizes the arrays by a
-- definition that is changing.

-- define: creates the lock or family p_name (p_family: a name "x/*").
-- r_created false: it existed, r_slots are its slots. r_old: the slots of
-- the family whose member in use p_name was, if any (a resized event).
CREATE OR REPLACE FUNCTION {{schema}}.define(p_name text, p_slots integer, p_family boolean)
RETURNS TABLE(r_created boolean, r_slots integer, r_running integer, r_waiting integer, r_at bigint, r_old integer)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_now timestamptz;
    v_old integer;
BEGIN
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    LOOP
        INSERT INTO {{schema}}.defs (name, slots, family) VALUES (p_name, p_slots, p_family)
            ON CONFLICT DO NOTHING;
        IF FOUND THEN
            v_now := clock_timestamp();
            -- the slots the name had as a family member, if it was one in use
            SELECT d.slots INTO v_old FROM {{schema}}.defs d
             WHERE NOT p_family AND d.name = ANY (({{schema}}.patterns(p_name))[2:])
               AND (EXISTS (SELECT 1 FROM {{schema}}.holding h WHERE h.lock = p_name)
                    OR EXISTS (SELECT 1 FROM {{schema}}.queue q WHERE q.lock = p_name))
             ORDER BY array_position({{schema}}.patterns(p_name), d.name) LIMIT 1;
            RETURN QUERY SELECT true, p_slots, {{schema}}.running_of(p_name), ({{schema}}.waiter_counts(p_name, v_now)).r_live,
                {{schema}}.micros(v_now), v_old;
            PERFORM {{schema}}.respill();
            RETURN;
        END IF;
        RETURN QUERY SELECT false, d.slots, 0, 0, 0::bigint, NULL::integer FROM {{schema}}.defs d WHERE d.name = p_name;
        IF FOUND THEN
            RETURN;
        END IF;
    END LOOP;
END
$sleeplock$;

-- resize: sets the slots of the lock or family p_name; no row when it has
-- no definition of its own.
CREATE OR REPLACE FUNCTION {{schema}}.resize(p_name text, p_slots integer)
RETURNS TABLE(r_old integer, r_family boolean, r_running integer, r_waiting integer, r_at bigint)
LANGUAGE plpgsql AS $sleeplock$
#variable_conflict use_column
DECLARE
    v_old    integer;
    v_family boolean;
    v_now    timestamptz;
BEGIN
    PERFORM pg_advisory_xact_lock({{schema}}.defs_key());
    SELECT d.slots, d.family INTO v_old, v_family FROM {{schema}}.defs d WHERE d.name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    UPDATE {{schema}}.defs d SET slots = p_slots WHERE d.name = p_name AND d.slots <> p_slots;
    IF FOUND THEN
        -- The waiters of its locks check: some may fit now, or be too
        -- heavy for good (a *WeightError).
        PERFORM {{schema}}.wake(q.lock, p_slots)
           FROM (SELECT DISTINCT x.lock FROM {{schema}}.queue x) q WHERE {{schema}}.def_of(q.lock) = p_name;
    END IF;
    v_now := clock_timestamp();
    IF v_family THEN
        RETURN QUERY SELECT v_old, true, 0, 0, {{schema}}.micros(v_now);
    ELSE
        RETURN QUERY SELECT v_old, false, {{schema}}.running_of(p_name), ({{schema}}.waiter_counts(p_name, v_now)).r_live,
            {{schema}}.micros(v_now);
    END IF;
    PERFORM {{schema}}.respill();
END
$sleeplock$;

-- defs_key: the key of the definitions' advisory lock, per schema.
CREATE OR REPLACE FUNCTION {{schema}}.defs_key() RETURNS bigint
LANGUAGE sql IMMUTABLE AS $sleeplock$
    SELECT hashtextextended('sleeplock definitions ' || {{channel}}, 0)
$sleeplock$;

-- respill: spills the rows in slot mode whose arrays no longer have their
-- lock's slots, so a lock shrunk below its holders grants nothing until
-- they are fewer than its slots.
CREATE OR REPLACE FUNCTION {{schema}}.respill() RETURNS void
LANGUAGE plpgsql AS $sleeplock$
DECLARE
    v_name text;
BEGIN
    FOR v_name IN SELECT l.name FROM {{schema}}.locks l
                   WHERE l.fast AND l.xref IS NOT NULL
                     AND cardinality(l.xref) IS DISTINCT FROM {{schema}}.slots_in({{schema}}.patterns(l.name))
                   ORDER BY l.name LOOP
        PERFORM {{schema}}.spill(v_name);
    END LOOP;
END
$sleeplock$;
